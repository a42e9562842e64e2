"""PostgreSQL's errors in memlane's terms: :func:`translate` maps a psycopg error to the
:class:`~memlane.errors.StoreError` subclass that says what happened and how to fix it.

======================================================  =======================================
psycopg error (SQLSTATE)                                memlane error
======================================================  =======================================
``55P03`` lock_not_available (``lock_timeout``),        :class:`~memlane.errors.StoreBusy`
``40P01`` deadlock, ``40001`` serialization failure,
``57014`` statement timeout, pool timeout
``25006`` read_only_sql_transaction (a replica),        :class:`~memlane.errors.ReadOnlyStore`
``42501`` insufficient_privilege
``OperationalError`` (connection refused or lost,       :class:`~memlane.errors.StoreError`
server restarted, ``57P01`` admin shutdown)             ("the next call reconnects")
anything else                                           :class:`~memlane.errors.StoreError`
======================================================  =======================================

Messages name the server as ``host:port/dbname`` (never the password of the DSN).
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from memlane.errors import ReadOnlyStore, StoreBusy, StoreError

_BUSY = ("55P03", "40P01", "40001", "57014")
_READONLY = ("25006", "42501")


def describe(dsn: str) -> str:
    """``postgresql://user@host:port/dbname`` of ``dsn`` without its password (for messages)."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<invalid dsn>"
    host = str(info.get("host") or "localhost")
    if host.startswith("/"):
        host = f"[socket {host}]"
    port = info.get("port") or 5432
    user = str(info.get("user") or "")
    return f"postgresql://{user + '@' if user else ''}{host}:{port}/{info.get('dbname') or ''}"


def translate(exc: BaseException, operation: str, where: str) -> StoreError:
    """The memlane error for ``exc`` raised by ``operation`` on the server ``where``
    (:func:`describe`). The caller raises the result ``from exc``."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    state = getattr(exc, "sqlstate", None)
    if state in _BUSY or type(exc).__name__ == "PoolTimeout":
        return StoreBusy(
            f"{where} is busy: {operation} waited too long for a lock or a connection "
            f"({detail}); raise [store] busy_timeout_ms (or pool_max_size) or retry",
            operation=operation,
        )
    if state in _READONLY:
        return ReadOnlyStore(
            f"cannot write {where} ({operation}: {detail}); connect to the primary (not a "
            "read replica) as a role allowed to write memlane's tables",
            operation=operation,
        )
    if isinstance(exc, pg_errors.UndefinedFile) or ("vector" in detail and state == "0A000"):
        return StoreError(
            f"{where}: the pgvector extension is missing ({operation}: {detail}); install "
            "pgvector on the server (`memlane postgres start` ships it)",
            operation=operation,
        )
    if isinstance(exc, psycopg.OperationalError) or state in ("57P01", "57P02", "57P03"):
        return StoreError(
            f"lost the connection to {where} during {operation} ({detail}); nothing of this "
            "call was committed. Check that the server is running; the next call reconnects",
            operation=operation,
        )
    return StoreError(f"{where}: {operation} failed: {detail}", operation=operation)
