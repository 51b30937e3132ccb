from plangate.journal.events import JournalEvent

__all__ = ["JournalEvent"]
