"""Calls a C extension module (demo_ext.c) from a Python function: `trace run --native-ext`
shows `weighted_sum` and its static helper under `report`."""
import sys

import demo_ext


def parse(args):
    return [int(a) for a in args]


def report(values):
    total = demo_ext.weighted_sum(values)
    print(f"weighted sum: {total}")
    return total


def main():
    report(parse(sys.argv[1:] or ["1", "2", "3"]))


if __name__ == "__main__":
    main()
