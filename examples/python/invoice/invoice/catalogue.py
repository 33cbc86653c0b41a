"""Unit prices in cents, read once from the catalogue and cached for the process."""

CATALOGUE = {"pen": "1.00", "book": "12.00", "lamp": "30.50"}

_prices = None


def parse_cents(text):
    units, _, cents = text.partition(".")
    return int(units) * 100 + int(cents.ljust(2, "0")[:2])


def load_prices():
    global _prices
    if _prices is None:
        _prices = {sku: parse_cents(price) for sku, price in CATALOGUE.items()}
    return _prices


def unit_price(sku):
    prices = load_prices()
    if sku not in prices:
        raise KeyError("unknown product: %s" % sku)
    return prices[sku]
