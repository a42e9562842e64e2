"""SQLite's errors in memlane's terms: :func:`translate` maps a driver error (or the ``OSError``
of creating the store's folder) to the :class:`~memlane.errors.StoreError` subclass that says
what happened and how to fix it.

=====================================================  ======================================
driver error                                           memlane error
=====================================================  ======================================
``SQLITE_BUSY``, ``SQLITE_LOCKED`` ("database is       :class:`~memlane.errors.StoreBusy`
locked")
``SQLITE_READONLY``, ``SQLITE_PERM``, ``EACCES``,      :class:`~memlane.errors.ReadOnlyStore`
``EROFS``, ``EPERM``
``SQLITE_NOTADB``, ``SQLITE_CORRUPT``                  :class:`~memlane.errors.CorruptStore`
``SQLITE_FULL``, ``ENOSPC``                            :class:`~memlane.errors.StoreError`
                                                       (disk full)
``SQLITE_CANTOPEN``, other ``OSError``                 :class:`~memlane.errors.StoreError`
                                                       (names the folder)
anything else                                          :class:`~memlane.errors.StoreError`
=====================================================  ======================================

The extended result code (``sqlite_errorcode``, Python 3.11+) decides; the message text is the
fallback for errors the driver raises without one.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from memlane.errors import CorruptStore, ReadOnlyStore, StoreBusy, StoreError

#: Primary result codes (the low byte of an extended code).
_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_READONLY = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH}
_CORRUPT = {sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT}
_FULL = {sqlite3.SQLITE_FULL}
_CANTOPEN = {sqlite3.SQLITE_CANTOPEN}

_MESSAGES = (
    (_BUSY, ("database is locked", "database table is locked", "database is busy")),
    (_READONLY, ("readonly database", "read-only", "readonly")),
    (_CORRUPT, ("file is not a database", "database disk image is malformed")),
    (_FULL, ("database or disk is full",)),
    (_CANTOPEN, ("unable to open database file",)),
)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        primary = code & 0xFF
        for group, _ in _MESSAGES:
            if primary in group:
                return primary
    text = str(exc).lower()
    for group, needles in _MESSAGES:
        if any(n in text for n in needles):
            return min(group)
    return code & 0xFF if isinstance(code, int) else None


def translate(
    exc: sqlite3.Error | OSError,
    operation: str,
    path: str | os.PathLike[str] | None,
    *,
    waited_s: float | None = None,
) -> StoreError:
    """The memlane error for ``exc``, raised by ``operation`` on the store at ``path``.

    ``waited_s``: how long the operation waited for the write lock (named in a
    :class:`~memlane.errors.StoreBusy` message). The caller raises the result ``from exc``.
    """
    where = Path(path) if path is not None else Path("<store>")
    if isinstance(exc, OSError):
        return _translate_os(exc, operation, where)
    detail = str(exc) or type(exc).__name__
    code = _primary_code(exc)
    if code in _BUSY:
        waited = f" for {waited_s:.1f} s" if waited_s is not None else ""
        return StoreBusy(
            f"{where} is busy: another memlane process held the write lock and {operation} "
            f"waited{waited} ({detail}); raise [store] busy_timeout_ms or retry",
            operation=operation,
            path=where,
        )
    if code in _READONLY:
        return ReadOnlyStore(
            f"cannot write {where} ({operation}: {detail}); check the permissions of the "
            f"file, its -wal and -shm files and the folder {where.parent}",
            operation=operation,
            path=where,
        )
    if code in _CORRUPT:
        return CorruptStore(
            f"{where} is not a valid memlane store ({operation}: {detail}); restore it from a "
            "backup, or move it away to start a new store",
            operation=operation,
            path=where,
        )
    if code in _FULL:
        return StoreError(
            f"{where}: the disk is full ({operation}: {detail}); the write was rolled back: "
            "free some space (or raise the size limit) and retry",
            operation=operation,
            path=where,
        )
    if code in _CANTOPEN:
        return StoreError(
            f"cannot open {where} ({operation}: {detail}); check that the folder {where.parent} "
            "exists and can be written",
            operation=operation,
            path=where,
        )
    return StoreError(f"{where}: {operation} failed: {detail}", operation=operation, path=where)


def _translate_os(exc: OSError, operation: str, where: Path) -> StoreError:
    name = exc.filename if exc.filename is not None else where
    detail = f"{exc.strerror or exc} ({name})"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ReadOnlyStore(
            f"cannot write {where} ({operation}: {detail}); check the permissions of the "
            f"folder {where.parent}",
            operation=operation,
            path=where,
        )
    if exc.errno == errno.ENOSPC:
        return StoreError(
            f"{where}: the disk is full ({operation}: {detail}); free some space and retry",
            operation=operation,
            path=where,
        )
    return StoreError(
        f"cannot open {where} ({operation}: {detail}); check that the folder {where.parent} "
        "can be created and written",
        operation=operation,
        path=where,
    )


def is_busy(exc: sqlite3.Error) -> bool:
    """``exc`` is SQLite's "database is locked" (another connection holds the lock)."""
    return _primary_code(exc) in _BUSY
