"""Durable store: versioned documents with compare-and-set and the governance journal."""

from plangate.store.store import Conflict, Document, JournalEntry, Store, Transaction
from plangate.store.urls import resolve_database_url

__all__ = ["Conflict", "Document", "JournalEntry", "Store", "Transaction", "resolve_database_url"]
