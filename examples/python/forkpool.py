#!/usr/bin/env python3
"""Fork safety: a `multiprocessing` fork Pool, then `os.fork` in a loop while the parent keeps
working, then more work in the parent. A recorder must give the parent exactly its own calls:
`pwork` 6000 times (2000 per fork), `after` once, whatever the children do.

Usage: python3 forkpool.py
"""

import multiprocessing
import os
import random
import warnings

# 3.12+ warns when forking a multi-threaded process: the pool's finished threads may still be
# exiting at the OS level when os.fork counts them. Harmless here (they hold no lock).
warnings.simplefilter("ignore", DeprecationWarning)


def square(x):
    return x * x


def pwork(i):
    return i % 7


def child_work(n):
    # Touches the modules whose at-fork handlers run in the child before any other code.
    return sum(random.random() > 2 for _ in range(50 * (n + 1)))


def after(total):
    return "total %d" % total


def main():
    pool = multiprocessing.get_context("fork").Pool(2)
    try:
        total = sum(pool.map(square, range(40)))
    finally:
        pool.close()
        pool.join()
    for n in range(3):
        pid = os.fork()
        if pid == 0:
            child_work(n)
            os._exit(0)
        for i in range(2000):
            total += pwork(i)
        os.waitpid(pid, 0)
    print(after(total))


if __name__ == "__main__":
    main()
