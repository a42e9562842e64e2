"""SQLite's connections for :class:`~memlane.store.sql.store.SQLStore`: one connection behind a
re-entrant lock (thread-safe), write transactions that take the write lock up front, buffered
access counts, and the vector leg over the in-process ANN cache.

One file in WAL mode. Writers take the lock up front (``BEGIN IMMEDIATE``) and wait up to
``busy_timeout_ms`` for another process, so concurrent writers queue instead of failing with
"database is locked". Changes are numbered (``vec_seq``) on from the highest committed number
while the write lock is held, so committed rows never leave a gap below the last one read.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memlane._ids import to_iso, utcnow
from memlane.errors import StoreError
from memlane.store.base import ScoredId, Vector
from memlane.store.index_cache import IndexCache
from memlane.store.records import VectorAsk
from memlane.store.sql.database import AccessBuffer
from memlane.store.sql.dialect import Dialect, Q
from memlane.store.sqlite.checkpoint import Checkpointer
from memlane.store.sqlite.connect import begin_immediate, lock_for_write
from memlane.store.sqlite.errors import translate
from memlane.types import Memory

#: The highest change number committed: of the rows, and of the purge marks (a purge deletes
#: rows, maybe the newest: numbering on from the rows alone would hand out again a number other
#: processes' caches have read past, and they would never see that change).
MAX_SEQ_SQL = (
    "SELECT max(coalesce((SELECT max(vec_seq) FROM memories), 0), "
    "coalesce((SELECT max(seq) FROM purge_marks), 0))"
)


class SQLiteDialect(Dialect):
    """SQLite's SQL (the defaults of :class:`~memlane.store.sql.dialect.Dialect`)."""

    errors = (sqlite3.Error,)


class SQLiteDatabase:
    """The :class:`~memlane.store.sql.database.Database` of one SQLite file."""

    dialect: Dialect = SQLiteDialect()
    seq_sql = "?"

    def __init__(self, conn: sqlite3.Connection, path: Path, busy_timeout_ms: int) -> None:
        self.conn = conn
        self.path = path
        self.where = str(path)
        self.lock = threading.RLock()
        #: Serialises this process's writers while one waits for SQLite's write lock.
        self._writer = threading.Lock()
        #: The thread of the open write transaction (None: none open).
        self._tx_thread: int | None = None
        self.depth = 0
        self._busy_ms = int(busy_timeout_ms)
        self._q = Q(conn, self.dialect)
        #: Highest ``vec_seq`` committed before the open write transaction (``None``: not read yet).
        self._tx_base_seq: int | None = None
        self._tx_next_seq = 0
        self._access = AccessBuffer()
        #: Copies the write-ahead log back into the file off the commits' path.
        self.checkpointer = Checkpointer(path)
        self._closed = False
        #: Called when a write transaction ends, committed or not (the ANN cache's pending rows).
        self.on_end: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ handles
    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store {self.path} is closed (open the engine again)")

    @contextmanager
    def read(self) -> Iterator[Q]:
        with self.lock:
            self._check_open()
            yield self._q

    @contextmanager
    def write(self) -> Iterator[Q]:
        with self.lock:
            self._check_open()
            if not self.depth:
                raise StoreError("internal: write outside a transaction")
            yield self._q

    committed = read

    def cache_lock(self) -> threading.RLock:
        return self.lock

    def in_transaction(self) -> bool:
        return self.depth > 0

    def lock_owner(self, q: Q, owner: str) -> None:
        """Nothing: SQLite's write lock is whole-database."""

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (nested calls of the same thread join it).

        The store's lock is never held while waiting for SQLite's write lock: another process
        holding it makes this writer wait (:func:`~.connect.lock_for_write`), not this process's
        readers (docs/errors.md: "Readers never wait for writers").
        """
        if self._tx_thread == threading.get_ident():  # nested: join the open transaction
            with self.lock:
                self.depth += 1
                try:
                    yield
                finally:
                    self.depth -= 1
            return
        with self._writer:  # one writer of this process waits for SQLite at a time
            # returns holding self.lock, BEGIN IMMEDIATE done
            lock_for_write(self.conn, self.lock, self._busy_ms, self.path, lambda: self._closed)
            try:
                self._tx_thread = threading.get_ident()
                self.depth = 1
                step = "write"
                try:
                    yield
                    step = "commit"
                    self.flush_access(force=True)
                    self.conn.execute("COMMIT")
                    self.checkpointer.committed()
                except sqlite3.Error as exc:  # the store's own statements (public ones translate)
                    self._rollback()
                    raise translate(exc, step, self.path) from exc
                except BaseException:
                    self._rollback()
                    raise
                finally:
                    self.depth = 0
                    self._tx_thread = None
                    self._tx_base_seq = None
                    for end in self.on_end:
                        end()
            finally:
                self.lock.release()

    def _rollback(self) -> None:
        """Roll back the open transaction unless SQLite already did (it does by itself on a full
        disk or an I/O error: a second ROLLBACK would fail with "no transaction is active"). A
        failing rollback never hides the error that caused it."""
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")

    def begin_immediate(self) -> None:
        """Take the write lock holding the store's lock (a forced flush on close)."""
        begin_immediate(self.conn, self._busy_ms, self.path)

    def _tx_base(self) -> int:
        """The highest ``vec_seq`` committed before the open write transaction. Read on first use
        (most transactions never need it): while the transaction holds the write lock no other
        process commits, and this one changes ``vec_seq`` only through :meth:`next_seq`."""
        if self._tx_base_seq is None:
            row = self.conn.execute(MAX_SEQ_SQL).fetchone()
            self._tx_base_seq = self._tx_next_seq = int(row[0] or 0)
        return self._tx_base_seq

    def seq_args(self) -> list[Any]:
        self._tx_base()
        self._tx_next_seq += 1
        return [self._tx_next_seq]

    def feed_bound(self, q: Q) -> int | None:
        return self._tx_base() if self.depth else None

    # ------------------------------------------------------------------ access counts
    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        self._access.add(owner, ids, to_iso(utcnow()))
        with self.lock:
            if not self._closed:
                self.flush_access()

    def flush_access(self, *, force: bool = False) -> None:
        """Write the buffered counts: inside a write transaction with it; else in one of their
        own, opportunistic (never making a search wait for another process's write lock: a
        busy store keeps them for the next flush) unless ``force`` (close: waits like any
        writer, within ``busy_timeout_ms``)."""
        with self.lock:
            taken = self._access.take(force=force)
            if not taken:
                return
            rows = [(c, ts, mid, owner) for (owner, mid), (c, ts) in taken.items()]
            sql = (
                "UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? "
                "WHERE id = ? AND owner = ?"
            )
            if self.depth:
                self.conn.executemany(sql, rows)
                return
            try:
                if force:
                    self.begin_immediate()
                else:
                    self.conn.execute("PRAGMA busy_timeout = 20")
                    try:
                        self.conn.execute("BEGIN IMMEDIATE")
                    finally:
                        self.conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                try:
                    self.conn.executemany(sql, rows)
                    self.conn.execute("COMMIT")
                    self.checkpointer.committed()
                except BaseException:
                    self._rollback()
                    raise
            except sqlite3.Error:
                self._access.put_back(taken)
                if force:
                    raise
                # busy, or read-only: kept for the next flush

    # ------------------------------------------------------------------ the rest
    def translate(self, exc: BaseException, operation: str, waited_s: float) -> Exception:
        assert isinstance(exc, sqlite3.Error | OSError)
        return translate(exc, operation, self.path, waited_s=waited_s)

    def prepare_purge(self) -> None:
        with self.lock:
            self.conn.execute("PRAGMA secure_delete = ON")

    def purge_statements(self) -> list[str]:
        return ["INSERT INTO memories_fts (memories_fts) VALUES ('optimize')"]

    def after_purge(self) -> None:
        with self.lock:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def size_bytes(self) -> int:
        files = (self.path, self.path.with_name(self.path.name + "-wal"))
        return sum(p.stat().st_size for p in files if p.exists())

    def close(self) -> None:
        with self.lock:
            if not self._closed:
                self._closed = True
                self.checkpointer.close()  # before the last connection (it removes the log)
                self.conn.close()


class CacheLeg:
    """SQLite's vector leg: the in-process ANN cache (:mod:`memlane.store.index_cache`), caught
    up from ``vec_seq``; rows of the open transaction are noted for :meth:`nearest`."""

    in_process = True

    def __init__(self, db: SQLiteDatabase, cache: IndexCache) -> None:
        self._db = db
        self._cache = cache
        db.on_end.append(cache.discard_pending)

    def nearest(
        self, q: Q, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        with self._db.lock:
            return self._cache.nearest(owner, agent, vector, k)

    def search(self, ask: VectorAsk) -> list[ScoredId]:
        with self._db.lock:
            return self._cache.vector_search(ask)

    def search_sql(self, ask: VectorAsk) -> None:
        """None: the ANN cache searches in process."""
        return None

    def written(self, owner: str, num: int, agent: str | None, vector: Vector) -> None:
        self._cache.note_pending(owner, num, agent, vector)
