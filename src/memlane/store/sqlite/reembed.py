"""``memlane reembed`` on a SQLite store: the steps of :mod:`memlane.store.sql.reembed`, with
SQLite's staging table (float32 blobs) and switch: every row's ``embedding`` from the staged
vectors and its ``vec_seq`` bumped, and a new ``store.uuid`` (so the saved search indexes, tied
to the old id, are rebuilt from the rows at the next open; their files are removed)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memlane._ids import new_id
from memlane.errors import InvalidArgument, StoreError
from memlane.store.sql import reembed as steps
from memlane.store.sql.dialect import Q
from memlane.store.sqlite.database import SQLiteDialect


class _SQLite:
    staging_ddl = (
        f"CREATE TABLE IF NOT EXISTS {steps.STAGING} "
        "(id TEXT PRIMARY KEY, content_hash TEXT NOT NULL, embedding BLOB NOT NULL)"
    )

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @contextmanager
    def locked(self, exclusive: bool = False) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")  # the write lock: other writers wait
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def switch(self, q: Q, dimension: int) -> None:
        row = q.one("SELECT coalesce(max(vec_seq), 0) FROM memories")
        base = int(row[0]) if row else 0
        q.run(
            f"UPDATE memories SET embedding = (SELECT s.embedding FROM {steps.STAGING} s "
            "WHERE s.id = memories.id), vec_seq = ? + num",
            (base,),
        )
        q.run(
            "INSERT INTO meta (key, value) VALUES ('store.uuid', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (new_id(),),
        )


def reembed(db_path: Path, ask: steps.ReembedAsk) -> steps.ReembedResult:
    """Re-embed every memory of the SQLite store at ``db_path`` with ``ask.embedder`` and switch
    the store's recorded model to it.

    Raises:
        InvalidArgument: no store at ``db_path``.
        EmbeddingError: the model failed (what was staged stays; run again to resume).
        StoreError: the file is not a memlane store, or is locked past ``ask.busy_timeout_ms``.
    """
    if not db_path.is_file():
        raise InvalidArgument(f"no store at {db_path}: nothing to re-embed")
    busy_timeout_ms = ask.busy_timeout_ms
    conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=busy_timeout_ms / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        q = Q(conn, SQLiteDialect())
        try:
            q.all("SELECT key FROM meta LIMIT 1")
        except sqlite3.Error as exc:
            raise StoreError(f"not a memlane store ({exc})", operation="reembed") from exc
        result = steps.run(q, _SQLite(conn), ask)
    except sqlite3.Error as exc:
        raise StoreError(f"{db_path}: re-embedding failed: {exc}", operation="reembed") from exc
    finally:
        conn.close()
    # The saved indexes carry the old store id and are ignored from now on: remove the files.
    shutil.rmtree(db_path.with_name(db_path.name + ".vec"), ignore_errors=True)
    return result
