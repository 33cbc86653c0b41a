"""Stock reports, produced line by line by generators."""

from shop.pricing import discounted


def format_cents(cents):
    return "%d.%02d" % divmod(cents, 100)


def item_lines(items):
    for item in sorted(items, key=lambda i: i.name):
        unit = discounted(item.price_cents, item.stock) if item.category != "bundle" else None
        shown = format_cents(unit) if unit is not None else "-"
        yield "  %-14s %4d x %8s = %10s" % (item.name, item.stock, shown, format_cents(item.value_cents()))


def category_report(inventory):
    for category, items in sorted(inventory.by_category().items()):
        yield "%s:" % category
        yield from item_lines(items)
