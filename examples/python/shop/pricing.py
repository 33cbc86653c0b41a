"""Prices: recursive bundle pricing and discount rules."""

BUNDLE_DISCOUNT_PERCENT = 10


def bundle_price(bundle):
    """Price of a bundle: the sum of its parts (recursively), minus the bundle discount."""
    total = 0
    for part in bundle.parts:
        total += part_price(part)
    return total - total * BUNDLE_DISCOUNT_PERCENT // 100


def part_price(item):
    if hasattr(item, "parts"):
        return bundle_price(item)
    return item.price_cents


def discounted(price_cents, quantity):
    """Volume discount: 5% from 10 pieces, 10% from 100."""
    if quantity >= 100:
        return price_cents * 90 // 100
    if quantity >= 10:
        return price_cents * 95 // 100
    return price_cents
