"""Python callbacks of a C extension module (demo_ext.c) in the shapes that test where
`trace run --native-ext` puts them (tests/python_native_ext.rs): a C function that calls two
callbacks and returns, callbacks that call C that calls Python again, a callback that raises.
Each callback sits under the C function that called it; what Python calls after a C function
returned sits beside it.
"""
import demo_ext


def first():
    return 1


def second():
    return 2


def after():
    return 3


def inner(weight):
    return demo_ext.both(first, second) + weight


def fails():
    raise ValueError("fails")


def handled():
    try:
        demo_ext.both(fails, second)
    except ValueError:
        return after()
    return 0


def main():
    demo_ext.both(first, second)
    after()
    total = demo_ext.apply(inner, [1, 2, 3])
    print(f"nested: {total + handled()}", flush=True)


if __name__ == "__main__":
    main()
