#!/usr/bin/env python3
"""Print a short checksum of stdin (run by shop_app.py as a subprocess)."""

import sys


def fletcher16(data):
    a = b = 0
    for byte in data:
        a = (a + byte) % 255
        b = (b + a) % 255
    return (b << 8) | a


def main():
    data = sys.stdin.read().encode()
    print("%04x (%d bytes)" % (fletcher16(data), len(data)))


if __name__ == "__main__":
    main()
