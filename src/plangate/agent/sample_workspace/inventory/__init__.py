"""A tiny stock-keeping library."""

from inventory.stock import OutOfStock, Stock

__all__ = ["OutOfStock", "Stock"]
