"""Opening the SQLite connection: WAL mode within one busy deadline, migration scripts, the
stand-in for a closed connection, and taking the write lock (:func:`lock_for_write`)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
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
    row = retry_busy(conn, "PRAGMA journal_mode = WAL", path, "open", busy_timeout_ms, (0.005, 0.2))
    return str(row.fetchone()[0])


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


def begin_immediate(conn: sqlite3.Connection, busy_ms: int, path: Path) -> None:
    """Take the write lock, waiting at most ``busy_ms`` in all (one deadline).

    SQLite's busy handler does the waiting; the loop covers the rare SQLITE_BUSY returned
    without calling it (e.g. while a WAL checkpoint restarts), each attempt allowed only the
    time left. Raises :class:`StoreBusy` at the deadline.
    """
    retry_busy(conn, "BEGIN IMMEDIATE", path, "begin a write", busy_ms, (0.01, 0.25))


def retry_busy(
    conn: sqlite3.Connection,
    statement: str,
    path: Path,
    operation: str,
    busy_ms: int,
    sleeps: tuple[float, float],
) -> sqlite3.Cursor:
    """Run ``statement``, again while SQLite answers "busy" without its busy handler having
    waited, within one deadline for all attempts (``busy_ms``), the sleeps doubling from the first
    to the longest of ``sleeps`` (seconds), each later attempt allowed only the time
    left (the connection's busy timeout shortened, then set back to ``busy_ms``). Raises
    :class:`StoreBusy` at the deadline, any other error translated (``operation``, ``path``)."""
    delay, longest = sleeps
    started = time.monotonic()
    deadline = started + busy_ms / 1000
    shortened = False
    try:
        while True:
            try:
                return conn.execute(statement)
            except sqlite3.Error as exc:
                now = time.monotonic()
                if not is_busy(exc) or now + 0.001 >= deadline:
                    raise translate(exc, operation, path, waited_s=now - started) from exc
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, longest)
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                conn.execute(f"PRAGMA busy_timeout = {left_ms}")
                shortened = True
    finally:
        if shortened:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")


def lock_for_write(
    conn: sqlite3.Connection,
    lock: threading.RLock,
    busy_ms: int,
    path: Path,
    closed: Callable[[], bool],
) -> None:
    """Take SQLite's write lock (``BEGIN IMMEDIATE``) on ``conn``, waiting at most ``busy_ms``
    in all; returns holding ``lock`` (the store's). Each attempt takes ``lock`` only for one
    non-waiting ``BEGIN IMMEDIATE`` (busy timeout 0) and releases it before sleeping, so reads of
    this process go on while another process holds the write lock (docs/errors.md: "Readers
    never wait for writers"; issue #24 measured 18 s reads behind one blocked write). The sleeps
    grow from 1 ms to 50 ms, like SQLite's own busy handler. Raises :class:`StoreBusy` at the
    deadline, :class:`StoreError` when ``closed()``.
    """
    started = time.monotonic()
    deadline = started + busy_ms / 1000
    delay = 0.001
    while True:
        lock.acquire()
        try:
            if closed():
                raise StoreError("the store is closed")
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            return  # holding the lock
        except sqlite3.Error as exc:
            lock.release()
            now = time.monotonic()
            if not is_busy(exc) or now >= deadline:
                raise translate(exc, "begin a write", path, waited_s=now - started) from exc
            time.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(delay * 2, 0.05)
        except BaseException:
            lock.release()
            raise
