"""A C extension module (demo_ext.c) calling back into Python, many times in a row:
`trace run --native-ext` shows `scale` under `apply`, and `finish` beside it, only if the
Python and native events are ordered on one clock (tests/python_native_ext.rs).

    callback_ext.py N            apply over N values, once
    callback_ext.py N forever    again and again (prints "ready" after the first round) until killed
"""
import sys

import demo_ext


def scale(weight):
    return weight * 10


def finish(total):
    return total + 1


def run(values):
    total = demo_ext.apply(scale, values)
    return finish(total)


def main():
    values = list(range(int(sys.argv[1])))
    print(f"applied: {run(values)}", flush=True)
    if sys.argv[2:] == ["forever"]:
        print("ready", flush=True)
        while True:
            run(values)


if __name__ == "__main__":
    main()
