"""Opening the SQLite connection: WAL mode within one busy deadline, migration scripts, and the
stand-in for a closed connection."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from memlane.errors import StoreError
from memlane.store.sqlite.errors import is_busy, translate


class ClosedConnection:
    """Stands in for the connection after close: any use raises StoreError, not sqlite3's own."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __getattr__(self, name: str) -> Any:
        raise StoreError(f"the store {self._path} is closed (open the engine again)")


def enable_wal(conn: sqlite3.Connection, path: Path, busy_timeout_ms: int) -> str:
    """Switch to WAL mode. Two processes creating a new file at once can get "database is
    locked" here without SQLite's busy handler being called (the switch needs an exclusive lock),
    so retry until the busy timeout, one deadline for all attempts; the mode is persistent, so
    the second one finds it set. Raises :class:`StoreBusy` at the deadline."""
    started = time.monotonic()
    deadline = started + busy_timeout_ms / 1000
    delay = 0.005
    try:
        while True:
            try:
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.Error as exc:
                now = time.monotonic()
                if not is_busy(exc) or now + 0.001 >= deadline:
                    raise translate(exc, "open", path, waited_s=now - started) from exc
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 0.2)
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                conn.execute(f"PRAGMA busy_timeout = {left_ms}")
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")


def split_sql(script: str) -> list[str]:
    """Split a migration script into statements (``sqlite3.complete_statement`` knows triggers)."""
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements
