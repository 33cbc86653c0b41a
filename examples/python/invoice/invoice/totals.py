"""Line totals: unit price times quantity, less the bulk discount."""

from invoice.catalogue import unit_price

BULK_QUANTITY = 10
BULK_PERCENT = 10


def bulk_discount(quantity):
    """Percent off for a line of `quantity` items: orders of BULK_QUANTITY or more."""
    if quantity > BULK_QUANTITY:
        return BULK_PERCENT
    return 0


def line_total(sku, quantity):
    gross = unit_price(sku) * quantity
    percent = bulk_discount(quantity)
    return gross - gross * percent // 100


def format_cents(cents):
    return "%d.%02d" % divmod(cents, 100)
