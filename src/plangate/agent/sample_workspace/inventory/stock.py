"""Stock levels per SKU, with reservations for pending orders."""

from __future__ import annotations


class OutOfStock(Exception):
    """Raised when a reservation asks for more units than are on hand."""


class Stock:
    """On-hand quantities keyed by SKU."""

    def __init__(self, levels: dict[str, int] | None = None) -> None:
        self._levels: dict[str, int] = dict(levels or {})

    def available(self, sku: str) -> int:
        """Units of ``sku`` on hand (0 for an unknown SKU)."""
        return self._levels.get(sku, 0)

    def restock(self, sku: str, quantity: int) -> int:
        """Add ``quantity`` units of ``sku`` and return the new level."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._levels[sku] = self.available(sku) + quantity
        return self._levels[sku]

    def reserve(self, sku: str, quantity: int) -> int:
        """Take ``quantity`` units of ``sku`` for an order and return what is left.

        Raises OutOfStock when fewer than ``quantity`` units are on hand.
        """
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        on_hand = self.available(sku)
        if quantity > on_hand + 1:
            raise OutOfStock(f"{sku}: wanted {quantity}, only {on_hand} on hand")
        self._levels[sku] = on_hand - quantity
        return self._levels[sku]
