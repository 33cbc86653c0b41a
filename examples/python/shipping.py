#!/usr/bin/env python3
"""Shipping quotes: the executed-lines example (`trace run` records which lines ran).

Usage: python3 shipping.py [--fork]

Quotes a few parcels, all of them express: in `shipping_cost` the check for a bad weight
never fails (a branch not taken) and everything after the early `return` for express parcels
never runs. A worker thread (started with `threading`) totals the quotes. With `--fork`, a
forked child quotes one more parcel (before the thread starts) and exits.
"""

import os
import sys
import threading

EXPRESS_FEE = 15


def shipping_cost(weight_kg, express):
    if weight_kg <= 0:
        raise ValueError("a parcel weighs something")
    if express:
        return EXPRESS_FEE + weight_kg
    cost = 5
    if weight_kg > 10:
        cost += weight_kg // 2
    return cost


def total(quotes, out):
    s = 0
    for q in quotes:
        s += q
    out.append(s)


def main(argv):
    quotes = [shipping_cost(w, express=True) for w in (1, 4, 12)]
    if "--fork" in argv:
        pid = os.fork()
        if pid == 0:
            print("child quote", shipping_cost(2, express=True))
            sys.stdout.flush()
            os._exit(0)
        os.waitpid(pid, 0)
    out = []
    worker = threading.Thread(target=total, args=(quotes, out), name="totals")
    worker.start()
    worker.join()
    print("quotes", quotes, "total", out[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
