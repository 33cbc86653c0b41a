#!/usr/bin/env python3
"""Coroutines, an async generator and a generator driven by send/throw: what a recorder must
tell apart as first calls and resumptions. Deterministic output.

Usage: python3 coroutines.py
"""

import asyncio


class Failure(Exception):
    pass


async def fetch(n):
    await asyncio.sleep(0)  # suspends once: one resumption
    return n * 2


async def ticker(k):
    for i in range(k):
        yield i


async def failing():
    await asyncio.sleep(0)
    raise Failure("boom")  # propagates out of the coroutine into main()


async def main():
    results = await asyncio.gather(fetch(1), fetch(2), fetch(3))
    ticks = [t async for t in ticker(3)]
    try:
        await failing()
    except Failure as e:
        caught = str(e)
    return results, ticks, caught


def countdown(n):
    while n > 0:
        try:
            yield n
        except ValueError:
            yield -1
        n -= 1


def drive():
    g = countdown(2)
    first = next(g)
    thrown = g.throw(ValueError)  # thrown into a started generator: a resumption
    rest = list(g)
    return first, thrown, rest


if __name__ == "__main__":
    print(asyncio.run(main()))
    print(drive())
