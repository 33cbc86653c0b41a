"""Items, bundles (items made of other items) and the inventory that holds them."""

from shop.errors import InvalidItem


class Item:
    def __init__(self, name, category, price_cents, stock):
        self.name = name
        self.category = category
        self.price_cents = price_cents
        self.stock = stock

    def value_cents(self):
        return self.price_cents * self.stock


class Bundle(Item):
    """An item sold as a set of other items (which can be bundles themselves)."""

    def __init__(self, name, parts, stock):
        super().__init__(name, "bundle", 0, stock)
        self.parts = parts

    def value_cents(self):
        from shop.pricing import bundle_price

        return bundle_price(self) * self.stock


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, item):
        self.items[item.name] = item

    def by_category(self):
        groups = {}
        for item in self.items.values():
            groups.setdefault(item.category, []).append(item)
        return groups

    def total_value_cents(self):
        return sum(item.value_cents() for item in self.items.values())


def parse_row(line_no, text):
    """`name,category,price,stock` -> Item; raises InvalidItem for a bad row."""
    fields = [f.strip() for f in text.split(",")]
    if len(fields) != 4:
        raise InvalidItem(line_no, "expected 4 fields, got %d" % len(fields))
    name, category, price, stock = fields
    try:
        return Item(name, category, parse_price(price), int(stock))
    except ValueError as e:
        raise InvalidItem(line_no, str(e)) from e


def parse_price(text):
    euros, _, cents = text.partition(".")
    return int(euros) * 100 + int((cents + "00")[:2])
