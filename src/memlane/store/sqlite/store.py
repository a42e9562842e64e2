"""SQLite implementation of :class:`~memlane.store.base.MemoryStore`: the one SQL implementation
(:class:`~memlane.store.sql.store.SQLStore`) over SQLite's dialect and connection
(:mod:`.database`). Embeddings live in the ``memories`` table (float32 blobs); the search legs run
over the backend-neutral caches of :mod:`memlane.store.index_cache`, saved beside the database
(``<db>.vec/``) on close so a cold process need not rebuild them.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memlane._files import private_dir, private_file
from memlane.errors import StoreError
from memlane.store.sql import migrate
from memlane.store.sql.dialect import Q
from memlane.store.sql.store import SQLStore
from memlane.store.sqlite.connect import enable_wal, split_sql
from memlane.store.sqlite.database import CacheLeg, SQLiteDatabase
from memlane.store.sqlite.errors import translate
from memlane.store.sqlite.migrations import MIGRATIONS

__all__ = ["SQLiteStore"]

_SETUP = (
    "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)",
)


def _has_table(q: Q, name: str) -> bool:
    row = q.one("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return bool(row and row[0])


class SQLiteStore(SQLStore[SQLiteDatabase]):
    """The embedded store. Use :meth:`open`; thread-safe (one connection behind a lock,
    :attr:`db`)."""

    path: Path

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        model: str,
        dimension: int,
        busy_timeout_ms: int = 60_000,
    ) -> SQLiteStore:
        """Open (creating if needed) the store at ``path`` and apply pending migrations.

        Raises:
            EmbeddingMismatch: the store was built with another model or dimension.
            StoreError: the file is not a memlane database or cannot be opened.
        """
        p = Path(path)
        try:
            # owner-only (issue #33): folders made 0700, the file 0600 before SQLite opens it
            # (SQLite gives its -wal and -shm the database file's mode)
            private_dir(p.parent)
            if str(p) != ":memory:":
                private_file(p)
            conn = sqlite3.connect(
                str(p),
                isolation_level=None,
                check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise translate(exc, "open", p) from exc
        db = SQLiteDatabase(conn, p, busy_timeout_ms)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            mode = enable_wal(conn, p, busy_timeout_ms)
            if mode != "wal":
                raise StoreError(
                    f"{p}: could not switch to WAL mode (got {mode})", operation="open", path=p
                )
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            # A migration that drops text (0008: the injection events' queries) must leave no
            # copy: freed bytes are zeroed while they run, and the WAL's copies of the old
            # pages are removed after them. Then "fast": deleted content is zeroed where that
            # costs no extra I/O (SQLite's secure_delete = FAST).
            conn.execute("PRAGMA secure_delete = ON")
            applied = migrate.migrate(
                Q(conn, db.dialect),
                MIGRATIONS,
                locked=db.transaction,
                has_table=_has_table,
                statements=split_sql,
                setup=_SETUP,
            )
            if applied:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA secure_delete = FAST")
            store = cls(
                db,
                lambda db_, cache, _: CacheLeg(db, cache),
                model=model,
                dimension=dimension,
                cache_folder=p.with_name(p.name + ".vec"),
            )
            store.path = p
            store.check_model()
        except sqlite3.Error as exc:
            db.close()
            raise translate(exc, "open", p) from exc
        except BaseException:
            db.close()
            raise
        return store
