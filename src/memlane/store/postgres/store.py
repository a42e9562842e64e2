"""PostgreSQL + pgvector implementation of :class:`~memlane.store.base.MemoryStore`.

Connections come from a ``psycopg_pool.ConnectionPool`` (autocommit; a write transaction holds
one connection of its thread from ``BEGIN`` to ``COMMIT``). After a lost connection or a server
restart, the call that met it fails with a :class:`~memlane.errors.StoreError` ("lost the
connection ...", nothing of it committed) and the pool is checked at once (:meth:`_lost`): every
broken idle connection is replaced, so the next call works. (Not a check on every checkout: that
would double the round trips of every read.) Threads run their reads and transactions
concurrently.

Legs of the search:

- vectors: SQL over the ``vector(dim)`` column and its HNSW index (``vector_cosine_ops``,
  ``hnsw.ef_search`` from ``[store]``, ``hnsw.iterative_scan = relaxed_order`` so that the owner,
  agent and type filters never leave fewer than ``k`` rows); :meth:`nearest` (the dedup lookup)
  is the same query on the transaction's connection, so it sees the transaction's own rows;
- full text: the backend-neutral BM25 index (:mod:`memlane.store.text_index`), one per owner
  and process, caught up from ``change_seq`` before every search
  (:class:`~memlane.store.postgres.feed.PostgresFeed`). PostgreSQL's ``ts_rank`` is not BM25;
  ranking with the same index as SQLite keeps the two backends' results the same (measured:
  docs/postgres.md). The ``fts`` tsvector column and its GIN index serve SQL-side queries.

Many processes, one database. Writers of one owner are serialised by a transaction-level
advisory lock on the owner (``pg_advisory_xact_lock(OWNER_LOCK, hashtext(owner))``), taken by the
first read or write of that owner in a write transaction and held to its commit:

- the same text offered by two processes at once: the second one's exact-hash lookup waits for
  the first one's commit and then finds its row (``hash_exact``), as SQLite's write lock does;
- the change watermark is gap-free per owner: ``change_seq`` comes from a sequence, and a
  sequence alone is not (a transaction that took 5 may commit after one that took 6, and a
  reader that saw 6 would skip 5 forever). Every change of an owner's rows happens under that
  owner's lock, so the numbers of one owner are handed out in commit order: once a reader sees
  a committed change ``n`` of an owner, every lower change of that owner is committed already.
  Per owner and not a global lock: writers of different owners never wait for each other, and
  the caches are per owner. (Deadlock: a transaction that writes two owners can meet another
  locking them in the other order; PostgreSQL aborts one, reported as
  :class:`~memlane.errors.StoreBusy`, nothing written.)

Concurrent turns of one session are serialised by the row lock of the session's ``sessions``
row (``begin_turn`` upserts it first thing in the turn's transaction): the second turn reads
what the first injected only after it committed, so the same memory is never injected twice.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from memlane._ids import new_id, utcnow
from memlane.errors import EmbeddingMismatch, NotFound, StoreError
from memlane.store.base import NewMemory, ScoredId, Vector
from memlane.store.index_cache import IndexCache
from memlane.store.postgres import migrations
from memlane.store.postgres.access import AccessMixin
from memlane.store.postgres.connect import configure
from memlane.store.postgres.errors import describe, translate, translating
from memlane.store.postgres.feed import PostgresFeed
from memlane.store.postgres.links import LinksMixin
from memlane.store.postgres.maintenance import MaintenanceMixin
from memlane.store.postgres.purge import PurgeMixin
from memlane.store.postgres.reads import ReadsMixin
from memlane.store.postgres.restore import RestoreMixin
from memlane.store.postgres.rows import MEMORY_COLUMNS, row_to_memory
from memlane.store.postgres.sessions import SessionsMixin
from memlane.store.sqlite.rows import merge_metadata
from memlane.types import ChangeReason, Memory, MemoryType, Status

__all__ = ["OWNER_LOCK", "PostgresStore"]

#: Advisory-lock class of the per-owner writer lock ("mlow"); the key is ``hashtext(owner)``.
OWNER_LOCK = 0x6D6C6F77


@translating
class PostgresStore(
    ReadsMixin, LinksMixin, MaintenanceMixin, SessionsMixin, AccessMixin, PurgeMixin, RestoreMixin
):
    """The server store. Use :meth:`open`; thread-safe (a pool of connections)."""

    def __init__(
        self,
        dsn: str,
        pool: ConnectionPool,
        model: str,
        dimension: int,
        *,
        busy_timeout_ms: int = 60_000,
        ef_search: int = 40,
    ) -> None:
        self.dsn = dsn
        #: The server and database, for messages (no password).
        self.where = describe(dsn)
        self.model = model
        self.dimension = dimension
        self._pool = pool
        self._busy_ms = int(busy_timeout_ms)
        self._ef_search = int(ef_search)
        self._tx = threading.local()
        self._closed = False
        self._store_uuid = ""
        #: Guards the BM25 caches and the feed's connection (committed reads only).
        self._cache_lock = threading.RLock()
        self._feed_conn: psycopg.Connection[Any] | None = None
        self._cache = IndexCache(PostgresFeed(self), dimension, None)
        self._init_access()

    # ------------------------------------------------------------------ open / close
    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        model: str,
        dimension: int,
        busy_timeout_ms: int = 60_000,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        hnsw_ef_search: int = 40,
        connect_timeout_s: float = 10.0,
    ) -> PostgresStore:
        """Connect to ``dsn``, apply pending migrations and check the embedding model.

        Raises:
            EmbeddingMismatch: the database was built with another model or dimension.
            StoreError: the server cannot be reached, or the schema cannot be created (the
                message names the server and the fix).
        """
        where = describe(dsn)
        timeout = max(1, round(connect_timeout_s))
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=timeout) as conn:
                migrations.migrate(
                    conn,
                    {"dim": int(dimension), "m": hnsw_m, "ef_construction": hnsw_ef_construction},
                )
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"cannot connect to {where} ({' '.join(str(exc).split())}); check [store] dsn "
                "(or MEMLANE_STORE__DSN) and that the server is running (`memlane postgres "
                "start` runs a local one)",
                operation="open",
            ) from exc
        except psycopg.Error as exc:
            raise translate(exc, "open", where) from exc

        pool = ConnectionPool(
            dsn,
            min_size=pool_min_size,
            max_size=max(pool_min_size, pool_max_size),
            kwargs={"autocommit": True, "connect_timeout": timeout},
            configure=functools.partial(
                configure, ef_search=hnsw_ef_search, lock_timeout_ms=busy_timeout_ms
            ),
            timeout=busy_timeout_ms / 1000,
            open=False,
            name="memlane",
        )
        try:
            pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg.Error as exc:
            pool.close()
            raise StoreError(
                f"cannot connect to {where} ({exc}); check [store] dsn and the server",
                operation="open",
            ) from exc
        store = cls(
            dsn,
            pool,
            model,
            dimension,
            busy_timeout_ms=busy_timeout_ms,
            ef_search=hnsw_ef_search,
        )
        try:
            store._check_model()
        except BaseException:
            store._closed = True
            pool.close()
            raise
        return store

    def _check_model(self) -> None:
        with self._use() as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if "store.uuid" not in meta:  # a new store (read first: a replica cannot write)
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('embedding.model', %s), "
                    "('embedding.dimension', %s), ('store.uuid', %s) ON CONFLICT (key) DO NOTHING",
                    (self.model, str(self.dimension), new_id()),
                )
                meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if (
            meta["embedding.model"] != self.model
            or int(meta["embedding.dimension"]) != self.dimension
        ):
            raise EmbeddingMismatch(
                f"{self.where} was built with embedding model {meta['embedding.model']!r} "
                f"({meta['embedding.dimension']} dims) but is being opened with {self.model!r} "
                f"({self.dimension} dims). Open it with the same [embedding] settings, or switch "
                f"it to the new model with `memlane reembed --model {self.model}`."
            )
        self._store_uuid = meta["store.uuid"]

    def close(self) -> None:
        """Flush buffered access counts, close the pool and the feed's connection."""
        if self._closed:
            return
        try:
            self._flush_access(force=True)
        finally:
            self._closed = True
            with self._cache_lock:
                if self._feed_conn is not None:
                    self._feed_conn.close()
                    self._feed_conn = None
            self._pool.close()

    def _lost(self) -> None:
        """A connection error was met: drop the pool's broken idle connections now (and the
        feed's), so that the next call reconnects instead of meeting another dead one."""
        with contextlib.suppress(Exception):
            self._pool.check()
        with self._cache_lock:
            if self._feed_conn is not None:
                self._feed_conn.close()
                self._feed_conn = None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store {self.where} is closed (open the engine again)")

    # ------------------------------------------------------------------ connections
    @contextmanager
    def _use(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection of this thread's open transaction, else one from the pool for the
        duration of the block (autocommit: each statement sees every committed row)."""
        conn = getattr(self._tx, "conn", None)
        if conn is not None:
            yield conn
            return
        self._check_open()
        with self._pool.connection() as pooled:
            yield pooled

    @contextmanager
    def _committed(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection that sees committed rows only: the pool's outside a transaction, the
        feed's (under the cache lock) inside one, never the transaction's own."""
        if getattr(self._tx, "conn", None) is None:
            with self._use() as conn:
                yield conn
            return
        with self._cache_lock:
            yield self._feed()

    def _feed(self) -> psycopg.Connection[Any]:
        """The feed's own autocommit connection (reconnected after a loss); call under
        ``_cache_lock``."""
        self._check_open()
        conn = self._feed_conn
        if conn is not None and (conn.closed or conn.broken):
            conn.close()
            conn = self._feed_conn = None
        if conn is None:
            conn = psycopg.connect(self.dsn, autocommit=True)
            try:
                configure(conn, self._ef_search, self._busy_ms)
            except BaseException:
                conn.close()
                raise
            self._feed_conn = conn
        return conn

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[None]:
        state = self._tx
        self._check_open()
        if getattr(state, "depth", 0):
            state.depth += 1
            try:
                yield
            finally:
                state.depth -= 1
            return
        step = "begin a write"
        try:
            conn = self._pool.getconn()
        except psycopg.Error as exc:
            raise translate(exc, step, self.where) from exc
        state.conn, state.depth, state.owners = conn, 1, set()
        try:
            with conn.transaction():
                step = "write"
                yield
                step = "commit"
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                self._lost()
            raise translate(exc, step, self.where) from exc
        finally:
            state.conn, state.depth, state.owners = None, 0, set()
            self._pool.putconn(conn)
        self._flush_access(due=True)  # "flushed with the next write transaction"

    def _require_tx(self) -> psycopg.Connection[Any]:
        conn = getattr(self._tx, "conn", None)
        if conn is None:
            self._check_open()
            raise StoreError("internal: write outside a transaction")
        return conn  # type: ignore[no-any-return]

    def _lock_owner(self, conn: psycopg.Connection[Any], owner: str) -> None:
        """In a write transaction, take ``owner``'s writer lock (once; held to the commit)."""
        owners: set[str] | None = getattr(self._tx, "owners", None)
        if getattr(self._tx, "conn", None) is conn and owners is not None and owner not in owners:
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (OWNER_LOCK, owner))
            owners.add(owner)

    # ------------------------------------------------------------------ rows
    def _fetch_one(
        self, conn: psycopg.Connection[Any], where: str, args: Sequence[Any]
    ) -> tuple[int, Memory] | None:
        row = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where}", args).fetchone()
        return None if row is None else (int(row[0]), row_to_memory(row))

    def _require(
        self, conn: psycopg.Connection[Any], owner: str, memory_id: str
    ) -> tuple[int, Memory]:
        """The row of ``owner``'s memory; :class:`NotFound` when missing or another owner's."""
        found = self._fetch_one(conn, "id = %s AND owner = %s", (memory_id, owner))
        if found is None:
            raise NotFound(f"no memory with id {memory_id!r} for owner {owner!r}")
        return found

    # ------------------------------------------------------------------ memories
    def insert(self, memory: NewMemory, embedding: Vector) -> Memory:
        conn = self._require_tx()
        self._lock_owner(conn, memory.owner)
        row = conn.execute(
            "INSERT INTO memories (id, owner, agent, session, source, type, content, "
            "content_hash, importance, status, created_at, updated_at, metadata, embedding, "
            "change_seq) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'active', %s, %s, %s, %s, "
            f"nextval('memories_change_seq')) RETURNING {MEMORY_COLUMNS}",
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
                memory.created_at,
                memory.created_at,
                json.dumps(dict(memory.metadata), ensure_ascii=False),
                np.asarray(embedding, dtype=np.float32),
            ),
        ).fetchone()
        assert row is not None
        return row_to_memory(row)

    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        with self._use() as conn:
            self._lock_owner(conn, owner)
            # "agent IS NULL" or "agent = ...", never "IS NOT DISTINCT FROM": the planner
            # estimates one row for that and scans every memory of the table instead of
            # walking the HNSW index (measured at 25,000 memories: 23.7 ms -> 1.2 ms a call,
            # the write path's nearest neighbours)
            agent_sql = "agent IS NULL" if agent is None else "agent = %(a)s"
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS}, embedding <=> %(v)s FROM memories "
                f"WHERE owner = %(o)s AND {agent_sql} AND status = 'active' "
                "ORDER BY embedding <=> %(v)s LIMIT %(k)s",
                {"v": np.asarray(vector, dtype=np.float32), "o": owner, "a": agent, "k": int(k)},
            ).fetchall()
        out = [(row_to_memory(r), 1.0 - float(r[-1])) for r in rows]
        out.sort(key=lambda pair: -pair[1])  # relaxed_order: near-sorted only
        return out

    def replace_content(
        self,
        owner: str,
        memory_id: str,
        content: str,
        content_hash: str,
        embedding: Vector,
        reason: ChangeReason,
    ) -> Memory:
        conn = self._require_tx()
        self._lock_owner(conn, owner)
        num, old = self._require(conn, owner, memory_id)
        conn.execute(
            "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, "
            "replaced_at) SELECT %s, coalesce(max(version), 0) + 1, %s, %s, %s, %s "
            "FROM memory_history WHERE memory_id = %s",
            (old.id, old.content, old.content_hash, ChangeReason(reason).value, utcnow(), old.id),
        )
        row = conn.execute(
            "UPDATE memories SET content = %s, content_hash = %s, embedding = %s, "
            "updated_at = %s, change_seq = nextval('memories_change_seq') WHERE num = %s "
            f"RETURNING {MEMORY_COLUMNS}",
            (content, content_hash, np.asarray(embedding, dtype=np.float32), utcnow(), num),
        ).fetchone()
        assert row is not None
        return row_to_memory(row)

    def confirm(
        self, owner: str, memory_id: str, provenance: Mapping[str, Any], importance: Any = None
    ) -> Memory:
        conn = self._require_tx()
        self._lock_owner(conn, owner)
        num, old = self._require(conn, owner, memory_id)
        metadata = merge_metadata(old.metadata, provenance)
        row = conn.execute(
            "UPDATE memories SET confirmations = confirmations + 1, metadata = %s, "
            "updated_at = %s, importance = GREATEST(importance, coalesce(%s, 0)) WHERE num = %s "
            f"RETURNING {MEMORY_COLUMNS}",
            (json.dumps(metadata, ensure_ascii=False), utcnow(), importance, num),
        ).fetchone()
        assert row is not None
        return row_to_memory(row)

    def set_status(self, owner: str, memory_id: str, status: Status) -> Memory:
        conn = self._require_tx()
        self._lock_owner(conn, owner)
        num, _ = self._require(conn, owner, memory_id)
        value = Status(status).value
        row = conn.execute(
            "UPDATE memories SET status = %(s)s, updated_at = %(now)s, "
            "change_seq = nextval('memories_change_seq'), valid_to = CASE WHEN %(s)s = "
            "'superseded' THEN %(now)s ELSE valid_to END WHERE num = %(num)s "
            f"RETURNING {MEMORY_COLUMNS}",
            {"s": value, "now": utcnow(), "num": num},
        ).fetchone()
        assert row is not None
        return row_to_memory(row)

    # ------------------------------------------------------------------ search
    def vector_search(
        self,
        owner: str,
        agent: str | None,
        vector: Vector,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        if k <= 0:
            return []
        where, args = self._scope(owner, agent, types)
        args.update(v=np.asarray(vector, dtype=np.float32), k=int(k))
        with self._committed() as conn:
            rows = conn.execute(
                f"SELECT id, embedding <=> %(v)s FROM memories WHERE {where} "
                "ORDER BY embedding <=> %(v)s LIMIT %(k)s",
                args,
            ).fetchall()
        hits = [ScoredId(r[0], 1.0 - float(r[1])) for r in rows]
        hits.sort(key=lambda h: -h.score)
        return hits

    @staticmethod
    def _scope(
        owner: str, agent: str | None, types: Collection[MemoryType] | None
    ) -> tuple[str, dict[str, Any]]:
        """``WHERE`` of an owner's active memories (agent's and shared, of ``types``)."""
        where = "owner = %(o)s AND status = 'active'"
        args: dict[str, Any] = {"o": owner}
        if agent is not None:
            where += " AND (agent = %(a)s OR agent IS NULL)"
            args["a"] = agent
        if types:
            where += " AND type = ANY(%(t)s)"
            args["t"] = sorted({MemoryType(t).value for t in types})
        return where, args

    def fts_search(
        self,
        owner: str,
        agent: str | None,
        query: str,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        with self._cache_lock:
            return self._cache.fts_search(owner, agent, query, k, types)
