"""The embedded backend: one SQLite file in WAL mode."""

from memlane.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
