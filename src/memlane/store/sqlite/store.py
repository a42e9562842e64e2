"""SQLite implementation of :class:`~memlane.store.base.MemoryStore`.

One file in WAL mode. Writers take the lock up front (``BEGIN IMMEDIATE``) and wait up to
``busy_timeout_ms`` for another process, so concurrent writers queue instead of failing with
"database is locked". Embeddings live in the ``memories`` table (float32 blobs). The search legs
run over the backend-neutral caches of :mod:`memlane.store.index_cache` (an ANN index and a BM25
index per owner), fed from ``vec_seq`` by :class:`~memlane.store.sqlite.feed.SQLiteFeed` and saved
beside the database (``<db>.vec/``) on close so a cold process need not rebuild them. Mixins:
:mod:`.sessions`, :mod:`.links` (and the dedup log), :mod:`.maintenance` (janitor, review).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np

from memlane._ids import new_id, to_iso, utcnow
from memlane.errors import EmbeddingMismatch, NotFound, StoreError
from memlane.store.base import NewMemory, ScoredId, Vector
from memlane.store.index_cache import PERSIST_MIN_ROWS, IndexCache
from memlane.store.sqlite.connect import (
    ClosedConnection,
    begin_immediate,
    enable_wal,
    lock_for_write,
    split_sql,
)
from memlane.store.sqlite.errors import translate, translating
from memlane.store.sqlite.feed import SQLiteFeed
from memlane.store.sqlite.links import LinksMixin
from memlane.store.sqlite.maintenance import MaintenanceMixin
from memlane.store.sqlite.migrations import MIGRATIONS, hash_current, rehash
from memlane.store.sqlite.purge import PurgeMixin
from memlane.store.sqlite.reads import ReadsMixin
from memlane.store.sqlite.restore import RestoreMixin
from memlane.store.sqlite.rows import MEMORY_COLUMNS, SET_STATUS_SQL, merge_metadata, row_to_memory
from memlane.store.sqlite.sessions import SessionsMixin
from memlane.store.text_index import TextIndex
from memlane.store.vector_index import OwnerIndex
from memlane.types import ChangeReason, Memory, MemoryType, Status

__all__ = ["SQLiteStore", "merge_metadata"]

_ACCESS_FLUSH_EVERY = 256
_ACCESS_FLUSH_SECONDS = 5.0
_PERSIST_MIN_VECTORS = PERSIST_MIN_ROWS  # indexes of fewer rows are not saved on close


@translating
class SQLiteStore(
    ReadsMixin, LinksMixin, SessionsMixin, MaintenanceMixin, PurgeMixin, RestoreMixin
):
    """The embedded store. Use :meth:`open`; thread-safe (one connection behind a lock)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        model: str,
        dimension: int,
        busy_timeout_ms: int = 60_000,
    ) -> None:
        self._conn = conn
        self.path = path
        self.model = model
        self.dimension = dimension
        self._lock = threading.RLock()
        #: Serialises this process's writers while one waits for SQLite's write lock.
        self._writer = threading.Lock()
        #: The thread of the open write transaction (None: none open).
        self._tx_thread: int | None = None
        self._depth = 0
        #: Highest ``vec_seq`` committed before the open write transaction (``None``: not read yet).
        self._tx_base_seq: int | None = None
        self._tx_next_seq = 0
        self._cache = IndexCache(
            SQLiteFeed(self),
            dimension,
            path.with_name(path.name + ".vec"),
            load_vector=lambda owner: self._load_index(owner),
            load_text=lambda owner: self._load_text_index(owner),
        )
        #: Rows of the open transaction seen by :meth:`nearest` (the cache's; cleared at its end).
        self._pending = self._cache.pending
        #: Buffered access counts: (owner, id) -> (count, last access time).
        self._access: dict[tuple[str, str], tuple[int, str]] = {}
        self._access_since = time.monotonic()
        self._store_uuid = ""
        self._closed = False
        self._busy_ms = int(busy_timeout_ms)

    # ------------------------------------------------------------------ open / close
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
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(p),
                isolation_level=None,
                check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise translate(exc, "open", p) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            mode = enable_wal(conn, p, busy_timeout_ms)
            if mode != "wal":
                raise StoreError(
                    f"{p}: could not switch to WAL mode (got {mode})", operation="open", path=p
                )
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            store = cls(conn, p, model, dimension, busy_timeout_ms)
            store._migrate()
            store._check_model()
        except sqlite3.Error as exc:
            conn.close()
            raise translate(exc, "open", p) from exc
        except BaseException:
            conn.close()
            raise
        return store

    def _migrate(self) -> None:
        # Read first: an up-to-date store (every open but the first) needs no write lock, so a
        # reader opens it while another process holds that lock.
        if not self._pending_migrations() and hash_current(self._conn):
            return
        with self.transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {r[0] for r in self._conn.execute("SELECT name FROM migrations")}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                for statement in split_sql(sql):
                    self._conn.execute(statement)
                self._conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                    (name, to_iso(utcnow())),
                )
            rehash(self._conn)

    def _pending_migrations(self) -> list[str]:
        known = self._conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
        ).fetchone()[0]
        done = {r[0] for r in self._conn.execute("SELECT name FROM migrations")} if known else set()
        return [name for name, _ in MIGRATIONS if name not in done]

    def _check_model(self) -> None:
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if "embedding.model" not in meta:  # a new store: record its model (read again, locked)
            with self.transaction():
                meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
                if "embedding.model" not in meta:
                    self._conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [
                            ("embedding.model", self.model),
                            ("embedding.dimension", str(self.dimension)),
                            ("store.uuid", new_id()),
                        ],
                    )
                    meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if (
            meta["embedding.model"] != self.model
            or int(meta["embedding.dimension"]) != self.dimension
        ):
            raise EmbeddingMismatch(
                f"{self.path} was built with embedding model {meta['embedding.model']!r} "
                f"({meta['embedding.dimension']} dims) but is being opened with {self.model!r} "
                f"({self.dimension} dims). Open it with the same [embedding] settings, or switch "
                f"it to the new model with `memlane reembed --model {self.model}`."
            )
        self._store_uuid = meta["store.uuid"]

    def close(self) -> None:
        """Flush buffered access counts, save large vector indexes, close the connection."""
        with self._lock:
            if self._closed:
                return
            try:
                self._flush_access(force=True)
                self._save_indexes()
            finally:
                self._closed = True
                self._conn.close()
                self._conn = cast(sqlite3.Connection, ClosedConnection(self.path))

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (nested calls of the same thread join it).

        The store's lock is never held while waiting for SQLite's write lock: another process
        holding it makes this writer wait (:func:`~.connect.lock_for_write`), not this process's
        readers.
        """
        if self._tx_thread == threading.get_ident():  # nested: join the open transaction
            with self._lock:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
            return
        with self._writer:  # one writer of this process waits for SQLite at a time
            # returns holding self._lock, BEGIN IMMEDIATE done
            lock_for_write(self._conn, self._lock, self._busy_ms, self.path, lambda: self._closed)
            try:
                self._tx_thread = threading.get_ident()
                self._depth = 1
                step = "write"
                try:
                    yield
                    step = "commit"
                    self._flush_access(force=True)
                    self._conn.execute("COMMIT")
                except sqlite3.Error as exc:  # the store's own statements (public ones translate)
                    self._rollback()
                    raise translate(exc, step, self.path) from exc
                except BaseException:
                    self._rollback()
                    raise
                finally:
                    self._depth = 0
                    self._tx_thread = None
                    self._tx_base_seq = None
                    self._pending.clear()
            finally:
                self._lock.release()

    def _rollback(self) -> None:
        """Roll back the open transaction unless SQLite already did (it does by itself on a full
        disk or an I/O error: a second ROLLBACK would fail with "no transaction is active"). A
        failing rollback never hides the error that caused it."""
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def _begin_immediate(self) -> None:
        """Take the write lock holding the store's lock (a forced flush on close)."""
        begin_immediate(self._conn, self._busy_ms, self.path)

    def _require_tx(self) -> None:
        if not self._depth:
            raise StoreError("internal: write outside a transaction")

    def _tx_base(self) -> int:
        """The highest ``vec_seq`` committed before the open write transaction. Read on first use
        (most transactions never need it): while the transaction holds the write lock no other
        process commits, and this one changes ``vec_seq`` only through :meth:`_next_seq`."""
        if self._tx_base_seq is None:
            row = self._conn.execute("SELECT max(vec_seq) FROM memories").fetchone()
            self._tx_base_seq = self._tx_next_seq = int(row[0] or 0)
        return self._tx_base_seq

    def _next_seq(self) -> int:
        self._tx_base()
        self._tx_next_seq += 1
        return self._tx_next_seq

    # ------------------------------------------------------------------ rows
    def _fetch_one(self, where: str, args: Sequence[Any]) -> tuple[int, Memory] | None:
        row = self._conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where}", args
        ).fetchone()
        return None if row is None else (int(row[0]), row_to_memory(row))

    def _require(self, owner: str, memory_id: str) -> tuple[int, Memory]:
        """The row of ``owner``'s memory ``memory_id``; :class:`NotFound` (the same message as
        for a missing id) when it does not exist or is another owner's."""
        found = self._fetch_one("id = ? AND owner = ?", (memory_id, owner))
        if found is None:
            raise NotFound(f"no memory with id {memory_id!r} for owner {owner!r}")
        return found

    # ------------------------------------------------------------------ memories
    def insert(self, memory: NewMemory, embedding: Vector) -> Memory:
        with self._lock:
            self._require_tx()
            seq = self._next_seq()
            now = to_iso(memory.created_at)
            blob = np.asarray(embedding, dtype=np.float32).tobytes()
            cur = self._conn.execute(
                "INSERT INTO memories (id, owner, agent, session, source, type, content, content_hash, "
                "importance, status, created_at, updated_at, metadata, embedding, vec_seq) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)",
                (
                    memory.id,
                    memory.owner,
                    memory.agent,
                    memory.session,
                    memory.source,
                    memory.type.value,
                    memory.content,
                    memory.content_hash,
                    memory.importance,
                    now,
                    now,
                    json.dumps(dict(memory.metadata), ensure_ascii=False),
                    blob,
                    seq,
                ),
            )
            num = int(cur.lastrowid or 0)
            self._cache.note_pending(memory.owner, num, memory.agent, embedding)
            return self._require(memory.owner, memory.id)[1]

    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        with self._lock:
            return self._cache.nearest(owner, agent, vector, k)

    def replace_content(
        self,
        owner: str,
        memory_id: str,
        content: str,
        content_hash: str,
        embedding: Vector,
        reason: ChangeReason,
    ) -> Memory:
        with self._lock:
            self._require_tx()
            num, old = self._require(owner, memory_id)
            self._add_history(old, ChangeReason(reason))
            self._conn.execute(
                "UPDATE memories SET content = ?, content_hash = ?, embedding = ?, updated_at = ?, "
                "vec_seq = ? WHERE num = ?",
                (
                    content,
                    content_hash,
                    np.asarray(embedding, dtype=np.float32).tobytes(),
                    to_iso(utcnow()),
                    self._next_seq(),
                    num,
                ),
            )
            self._cache.note_pending(old.owner, num, old.agent, embedding)
            return self._require(owner, memory_id)[1]

    def _add_history(self, old: Memory, reason: ChangeReason) -> None:
        version = self._conn.execute(
            "SELECT count(*) FROM memory_history WHERE memory_id = ?", (old.id,)
        ).fetchone()[0]
        self._conn.execute(
            "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, replaced_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                old.id,
                int(version) + 1,
                old.content,
                old.content_hash,
                reason.value,
                to_iso(utcnow()),
            ),
        )

    def confirm(
        self, owner: str, memory_id: str, provenance: Mapping[str, Any], importance: Any = None
    ) -> Memory:
        with self._lock:
            self._require_tx()
            num, old = self._require(owner, memory_id)
            metadata = merge_metadata(old.metadata, provenance)
            self._conn.execute(
                "UPDATE memories SET confirmations = confirmations + 1, metadata = ?, updated_at = ?,"
                " importance = MAX(importance, COALESCE(?, 0)) WHERE num = ?",
                (json.dumps(metadata, ensure_ascii=False), to_iso(utcnow()), importance, num),
            )
            return self._require(owner, memory_id)[1]

    def set_status(self, owner: str, memory_id: str, status: Status) -> Memory:
        with self._lock:
            self._require_tx()
            num, _ = self._require(owner, memory_id)
            self._conn.execute(
                SET_STATUS_SQL,
                (Status(status).value, to_iso(utcnow()), self._next_seq(), num),
            )
            return self._require(owner, memory_id)[1]

    # ------------------------------------------------------------------ search caches
    @property
    def _indexes(self) -> dict[str, OwnerIndex]:
        """The per-owner vector indexes of the cache (as far as caught up)."""
        return self._cache.vectors

    def _load_index(self, owner: str) -> OwnerIndex | None:
        """The saved vector index of ``owner`` (``None``: none usable; rebuilt from the rows)."""
        return self._cache.load_vector_file(owner)

    def _load_text_index(self, owner: str) -> TextIndex | None:
        """The saved BM25 index of ``owner`` (``None``: none usable; rebuilt from the rows)."""
        return self._cache.load_text_file(owner)

    def _save_indexes(self) -> None:
        self._cache.save(_PERSIST_MIN_VECTORS)

    def vector_search(
        self,
        owner: str,
        agent: str | None,
        vector: Vector,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        with self._lock:
            return self._cache.vector_search(owner, agent, vector, k, types)

    def fts_search(
        self,
        owner: str,
        agent: str | None,
        query: str,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        with self._lock:
            return self._cache.fts_search(owner, agent, query, k, types)

    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        now = to_iso(utcnow())
        with self._lock:
            for mid in ids:
                count, _ = self._access.get((owner, mid), (0, now))
                self._access[(owner, mid)] = (count + 1, now)
            self._flush_access()

    def _flush_access(self, *, force: bool = False) -> None:
        if not self._access:
            self._access_since = time.monotonic()
            return
        due = len(self._access) >= _ACCESS_FLUSH_EVERY or (
            time.monotonic() - self._access_since >= _ACCESS_FLUSH_SECONDS
        )
        if not (force or due):
            return
        rows = [(c, ts, mid, owner) for (owner, mid), (c, ts) in self._access.items()]
        sql = (
            "UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? "
            "WHERE id = ? AND owner = ?"
        )
        if self._depth:
            self._conn.executemany(sql, rows)
        else:
            # Opportunistic: never make a search wait for another process's write lock (but a
            # forced flush, on close, waits like any writer, within busy_timeout_ms).
            try:
                if force:
                    self._begin_immediate()
                else:
                    self._conn.execute("PRAGMA busy_timeout = 20")
                    try:
                        self._conn.execute("BEGIN IMMEDIATE")
                    finally:
                        self._conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                try:
                    self._conn.executemany(sql, rows)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
            except sqlite3.Error:
                if not force:
                    return  # busy, or read-only: keep the buffer for the next flush
                raise
        self._access.clear()
        self._access_since = time.monotonic()
