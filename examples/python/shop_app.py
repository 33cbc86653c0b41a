#!/usr/bin/env python3
"""Stock report for a small shop: the multi-module tracing example.

Usage: python3 shop_app.py [CATALOGUE.csv]

Reads the catalogue (default: catalogue.csv next to this file), builds an inventory with
nested bundles, prints a per-category report (generators), per-category statistics computed
in named threads, rejects a bad extra row (an exception raised three calls deep and caught
here), and has a checksum of the report computed by a subprocess (checksum.py).
"""

import os
import subprocess
import sys

from shop import Bundle, Inventory, InvalidItem
from shop.models import parse_row
from shop.report import category_report, format_cents
from shop.stats import compute_all

HERE = os.path.dirname(os.path.abspath(__file__))


def load_catalogue(path):
    inventory = Inventory()
    with open(path) as f:
        for line_no, text in enumerate(f, 1):
            if text.strip():
                inventory.add(parse_row(line_no, text))
    return inventory


def add_bundles(inventory):
    items = inventory.items
    desk_set = Bundle("desk-set", [items["pencil"], items["notebook"], items["eraser"]], 5)
    tea_set = Bundle("tea-set", [items["teapot"], items["mug"], items["mug"]], 2)
    inventory.add(desk_set)
    inventory.add(tea_set)
    inventory.add(Bundle("gift-box", [desk_set, tea_set], 1))


def validate_extra(rows):
    """Parse extra rows; the first bad one raises InvalidItem out of here."""
    return [parse_row(n, text) for n, text in enumerate(rows, 1)]


def checksum_in_subprocess(text):
    script = os.path.join(HERE, "checksum.py")
    done = subprocess.run([sys.executable, script], input=text, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def main(argv):
    path = argv[1] if len(argv) > 1 else os.path.join(HERE, "catalogue.csv")
    inventory = load_catalogue(path)
    add_bundles(inventory)
    report = "\n".join(category_report(inventory))
    print(report)
    for category, count, value in compute_all(inventory):
        print("stats %-10s %5d pieces %10s" % (category, count, format_cents(value)))
    print("total value", format_cents(inventory.total_value_cents()))
    try:
        validate_extra(["stapler,stationery,3.20,10", "ruler,stationery,one euro,4"])
    except InvalidItem as e:
        print("rejected extra row:", e)
    print("report checksum", checksum_in_subprocess(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
