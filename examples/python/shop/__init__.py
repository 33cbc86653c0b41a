"""A tiny shop: items, pricing rules, stock reports. Used as a multi-module tracing example."""

from shop.errors import InvalidItem
from shop.models import Bundle, Inventory, Item

__all__ = ["Bundle", "Inventory", "InvalidItem", "Item"]
