#!/usr/bin/env python3
"""Call-heavy workload for overhead measurements: recursion plus many small method calls.

Usage: python3 callheavy.py [N]   (default 25: fib(25) and 200*N*N small method calls)
"""

import sys


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Counter:
    def __init__(self):
        self.total = 0

    def add(self, n):
        self.total += self.scale(n)

    def scale(self, n):
        return n * 2


def count(n):
    c = Counter()
    for i in range(200 * n * n):
        c.add(i % 7)
    return c.total


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 25
    print("fib(%d) = %d" % (n, fib(n)))
    print("counter total", count(n))


if __name__ == "__main__":
    main(sys.argv)
