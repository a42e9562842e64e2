"""PostgreSQL's connections for :class:`~memlane.store.sql.store.SQLStore`: a
``psycopg_pool.ConnectionPool`` (autocommit; a write transaction holds one connection of its
thread from ``BEGIN`` to ``COMMIT``), the per-owner writer lock, buffered access counts, and the
vector leg in SQL (pgvector's HNSW index).

After a lost connection or a server restart, the call that met it fails with a
:class:`~memlane.errors.StoreError` ("lost the connection ...", nothing of it committed) and the
pool is checked at once (:meth:`PostgresDatabase.lost`): every broken idle connection is
replaced, so the next call works. (Not a check on every checkout: that would double the round
trips of every read.) Threads run their reads and transactions concurrently.

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
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from memlane._ids import utcnow
from memlane.errors import StoreError
from memlane.store.base import ScoredId, Vector
from memlane.store.postgres.connect import configure
from memlane.store.postgres.errors import translate
from memlane.store.records import VectorAsk
from memlane.store.sql.database import AccessBuffer
from memlane.store.sql.dialect import PgDialect, Q, observe
from memlane.store.sql.memories import Memories, exact_agent_sql, scope_sql
from memlane.store.sql.rows import MEMORY_COLUMNS
from memlane.types import Memory, MemoryType

#: Advisory-lock class of the per-owner writer lock ("mlow"); the key is ``hashtext(owner)``.
OWNER_LOCK = 0x6D6C6F77


class PostgresDialect(PgDialect):
    """PostgreSQL's SQL, with psycopg's errors."""

    errors = (psycopg.Error,)


class PostgresDatabase:
    """The :class:`~memlane.store.sql.database.Database` of one PostgreSQL database."""

    dialect = PostgresDialect()
    seq_sql = "nextval('memories_change_seq')"

    def __init__(
        self, dsn: str, pool: ConnectionPool, where: str, *, busy_timeout_ms: int, ef_search: int
    ) -> None:
        self.dsn = dsn
        self.where = where
        self.pool = pool
        self._busy_ms = int(busy_timeout_ms)
        self._ef_search = int(ef_search)
        self._tx = threading.local()
        self._closed = False
        #: Guards the BM25 caches and the feed's connection (committed reads only).
        self._cache_lock = threading.RLock()
        self._feed_conn: psycopg.Connection[Any] | None = None
        self._access = AccessBuffer()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store {self.where} is closed (open the engine again)")

    # ------------------------------------------------------------------ handles
    @contextmanager
    def read(self) -> Iterator[Q]:
        q: Q | None = getattr(self._tx, "q", None)
        if q is not None:
            yield q
            return
        self._check_open()
        with self.pool.connection() as pooled:
            yield Q(pooled, self.dialect)

    @contextmanager
    def write(self) -> Iterator[Q]:
        q: Q | None = getattr(self._tx, "q", None)
        if q is None:
            self._check_open()
            raise StoreError("internal: write outside a transaction")
        yield q

    @contextmanager
    def committed(self) -> Iterator[Q]:
        """The pool's connection outside a transaction; the feed's own (under the cache lock)
        inside one, never the transaction's."""
        if getattr(self._tx, "conn", None) is None:
            with self.read() as q:
                yield q
            return
        with self._cache_lock:
            yield Q(self._feed(), self.dialect)

    def _feed(self) -> psycopg.Connection[Any]:
        """The feed's own autocommit connection (reconnected after a loss); call under the
        cache lock."""
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

    def cache_lock(self) -> threading.RLock:
        return self._cache_lock

    def in_transaction(self) -> bool:
        return getattr(self._tx, "conn", None) is not None

    def lock_owner(self, q: Q, owner: str) -> None:
        owners: set[str] | None = getattr(self._tx, "owners", None)
        if getattr(self._tx, "conn", None) is q.conn and owners is not None and owner not in owners:
            # deferred: it travels with the transaction's next statement, in order
            q.defer("SELECT pg_advisory_xact_lock(?, hashtext(?))", (OWNER_LOCK, owner))
            owners.add(owner)

    def seq_args(self) -> list[Any]:
        return []

    def feed_bound(self, q: Q) -> int | None:
        return None

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction on a connection of the pool, held by this thread. ``BEGIN``
        travels with the transaction's first statement and ``COMMIT`` with its deferred writes
        (:meth:`~memlane.store.sql.dialect.Q.defer`): a transaction of one statement is one
        round trip plus the commit's; a transaction that ran nothing sends nothing."""
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
            conn = self.pool.getconn()
        except psycopg.Error as exc:
            raise translate(exc, step, self.where) from exc
        q = Q(conn, self.dialect)
        q.pending.append(("BEGIN", None))
        state.conn, state.q, state.depth, state.owners = conn, q, 1, set()
        try:
            step = "write"
            yield
            step = "commit"
            if q.pending == [("BEGIN", None)]:
                q.pending.clear()  # nothing ran: nothing to send
            else:
                self._commit(q)
        except BaseException as exc:
            q.pending.clear()
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            if isinstance(exc, psycopg.Error):
                if isinstance(exc, psycopg.OperationalError):
                    self.lost()
                raise translate(exc, step, self.where) from exc
            raise
        finally:
            state.conn, state.q, state.depth, state.owners = None, None, 0, set()
            self.pool.putconn(conn)
        self._flush(due=True)  # "flushed with the next write transaction"

    def lost(self) -> None:
        """A connection error was met: drop the pool's broken idle connections now (and the
        feed's), so that the next call reconnects instead of meeting another dead one."""
        with contextlib.suppress(Exception):
            self.pool.check()
        with self._cache_lock:
            if self._feed_conn is not None:
                self._feed_conn.close()
                self._feed_conn = None

    # ------------------------------------------------------------------ access counts
    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        self._access.add(owner, ids, utcnow())
        self._flush()

    def flush_access(self, *, force: bool = False) -> None:
        self._flush(force=force)

    def _flush(self, *, force: bool = False, due: bool = False) -> None:
        """Write the buffered access counts in one statement of their own (never inside a write
        transaction: their row locks would widen its footprint and could deadlock with another
        writer). Rows in order of ``num``; an opportunistic flush skips rows another writer has
        locked (``SKIP LOCKED``) and keeps their counts for the next flush; ``force`` (close)
        waits for them. Counts of ids that are not the owner's are dropped."""
        if getattr(self._tx, "conn", None) is not None or self._closed:
            return
        taken = self._access.take(force=force, due=due)
        if not taken:
            return
        keys = sorted(taken)
        try:
            with self.pool.connection() as conn:
                try:
                    done = Q(conn, self.dialect).batch(_flush_block(taken, keys, force))[2]
                except psycopg.Error:
                    with contextlib.suppress(psycopg.Error):
                        conn.rollback()  # the block's transaction, failed
                    raise
                self._settle(conn, taken, keys, done)
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == "25006":  # a read replica: counts stay there
                taken.clear()
            elif force:
                raise
        finally:
            self._access.put_back(taken)  # rows another writer had locked: next time

    def _settle(
        self,
        conn: psycopg.Connection[Any],
        taken: dict[tuple[str, str], tuple[int, Any]],
        keys: Sequence[tuple[str, str]],
        done: Sequence[Sequence[Any]],
    ) -> None:
        """Drop from ``taken`` the counts a flush wrote (``done``: its ``(owner, id)`` rows) and
        those of ids that are not (or no longer) the owner's; what is left was locked by
        another writer and goes back to the buffer."""
        for key in done:
            taken.pop(tuple(key), None)  # type: ignore[arg-type]
        for key in keys:  # ids that are not (or no longer) the owner's: dropped
            if key in taken and not _exists(conn, key):
                taken.pop(key)

    def _commit(self, q: Q) -> None:
        """Send the transaction's deferred writes and ``COMMIT`` in one round trip, with the
        access counts due (:meth:`_flush`'s block) after the ``COMMIT`` in the same trip:
        a transaction of their own (``SKIP LOCKED``), so they never widen the transaction's
        locks, and the turn that recorded them costs no trip of its own. When only that block
        fails (after a successful ``COMMIT``), its counts go back to the buffer and the
        transaction stands; any other error is the transaction's."""
        taken = self._access.take(due=True)
        keys = sorted(taken)
        todo = [*q.pending, ("COMMIT", None)]
        commit_at = len(todo) - 1
        q.pending.clear()
        if taken:
            todo.extend(_flush_block(taken, keys, False))
        cursors: list[Any] = []
        try:
            try:
                with q.conn.pipeline():
                    for sql, args in todo:
                        cursors.append(self.dialect.execute(q.conn, sql, args, False))
            finally:
                observe(self.dialect, len(todo))
            if taken:
                self._settle(q.conn, taken, keys, cursors[commit_at + 3].fetchall())
        except psycopg.Error:
            committed = (
                taken and len(cursors) == len(todo) and cursors[commit_at].statusmessage == "COMMIT"
            )
            if not committed:
                raise
            with contextlib.suppress(psycopg.Error):
                q.conn.rollback()  # the access counts' block, failed
        finally:
            self._access.put_back(taken)

    # ------------------------------------------------------------------ the rest
    def translate(self, exc: BaseException, operation: str, waited_s: float) -> Exception:
        if isinstance(exc, psycopg.OperationalError):
            self.lost()
        return translate(exc, operation, self.where)

    def prepare_purge(self) -> None:
        """Nothing: old row versions stay until ``VACUUM`` (docs/security.md)."""

    def purge_statements(self) -> list[str]:
        return []

    def after_purge(self) -> None:
        """Nothing (see :meth:`prepare_purge`)."""

    def size_bytes(self) -> int:
        with self.read() as q:
            row = q.one("SELECT pg_database_size(current_database())")
        return int(row[0]) if row else 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._cache_lock:
            if self._feed_conn is not None:
                self._feed_conn.close()
                self._feed_conn = None
        self.pool.close()


def _flush_block(
    taken: dict[tuple[str, str], tuple[int, Any]], keys: Sequence[tuple[str, str]], force: bool
) -> list[tuple[str, Any]]:
    """:func:`_flush_sql` in a transaction of its own that commits without waiting for the
    disk (``synchronous_commit = off``): the counts are best-effort statistics, buffered in
    memory for seconds anyway, and the ~2 ms of an fsync each turn bought nothing. Its rows
    are the third statement's."""
    return [
        ("BEGIN", None),
        (PostgresDialect.async_commit_sql, None),
        _flush_sql(taken, keys, force),
        ("COMMIT", None),
    ]


def _flush_sql(
    taken: dict[tuple[str, str], tuple[int, Any]], keys: Sequence[tuple[str, str]], force: bool
) -> tuple[str, Any]:
    """The statement that adds the buffered access counts ``taken`` (``keys``: its keys in
    order) to their rows, returning the ``(owner, id)`` of the rows written; without ``force``
    it skips rows another writer has locked."""
    sql = (
        "WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], "
        "?::timestamptz[]) AS v(owner, id, c, ts)), "
        # "m.id = ANY(...)": the planner cannot size unnest() and joined it
        # to a scan of every memory (13.8 ms a flush at 20,000 memories, one
        # flush per injection turn); the ids read through their index instead
        "free AS (SELECT m.num, v.c, v.ts FROM memories m JOIN v "
        "ON m.id = v.id AND m.owner = v.owner WHERE m.id = ANY(?::text[]) "
        "ORDER BY m.num "
        f"FOR UPDATE OF m {'' if force else 'SKIP LOCKED'}) "
        "UPDATE memories m SET access_count = m.access_count + free.c, "
        "last_accessed_at = GREATEST(m.last_accessed_at, free.ts) FROM free "
        "WHERE m.num = free.num RETURNING m.owner, m.id"
    )
    return sql, (
        [o for o, _ in keys],
        [i for _, i in keys],
        [taken[k][0] for k in keys],
        [taken[k][1] for k in keys],
        [i for _, i in keys],
    )


def _exists(conn: psycopg.Connection[Any], key: tuple[str, str]) -> bool:
    row = conn.execute(
        "SELECT 1 FROM memories WHERE owner = %s AND id = %s", (key[0], key[1])
    ).fetchone()
    return row is not None


class SqlLeg:
    """PostgreSQL's vector leg: SQL over the ``vector(dim)`` column and its HNSW index
    (``vector_cosine_ops``, ``hnsw.ef_search`` from ``[store]``, ``hnsw.iterative_scan =
    relaxed_order`` so that the owner, agent and type filters never leave fewer than ``k`` rows).
    :meth:`nearest` runs on the transaction's connection, so it sees the transaction's rows."""

    in_process = False

    def __init__(self, db: PostgresDatabase, memories: Memories) -> None:
        self._db = db
        self._rows = memories.rows

    def nearest(
        self, q: Q, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        agent_sql, agent_args = exact_agent_sql(agent)
        v = np.asarray(vector, dtype=np.float32)
        rows = q.all(
            f"SELECT {MEMORY_COLUMNS}, embedding <=> ? FROM memories "
            f"WHERE owner = ? AND {agent_sql} AND status = 'active' "
            "ORDER BY embedding <=> ? LIMIT ?",
            [v, owner, *agent_args, v, int(k)],
        )
        out = [(self._rows.memory(r), 1.0 - float(r[-1])) for r in rows]
        out.sort(key=lambda pair: -pair[1])  # relaxed_order: near-sorted only
        return out

    def search(self, ask: VectorAsk) -> list[ScoredId]:
        with self._db.committed() as q:
            rows = q.all(*self._sql(ask, "id"))
        hits = [ScoredId(r[0], 1.0 - float(r[1])) for r in rows]
        hits.sort(key=lambda h: -h.score)
        return hits

    def search_sql(self, ask: VectorAsk) -> tuple[str, list[Any]]:
        return self._sql(ask, f"{MEMORY_COLUMNS}, embedding")

    @staticmethod
    def _sql(ask: VectorAsk, columns: str) -> tuple[str, list[Any]]:
        """The HNSW query of ``ask`` returning ``columns`` and the cosine distance."""
        where, args = scope_sql(ask.owner, ask.agent, ask.project)
        if ask.types:
            where += " AND type = ANY(?::text[])"
            args.append(sorted({MemoryType(t).value for t in ask.types}))
        v = np.asarray(ask.vector, dtype=np.float32)
        return (
            f"SELECT {columns}, embedding <=> ? FROM memories WHERE {where} "
            "AND status = 'active' ORDER BY embedding <=> ? LIMIT ?",
            [v, *args, v, int(ask.k)],
        )

    def written(self, owner: str, num: int, agent: str | None, vector: Vector) -> None:
        """Nothing: the SQL leg reads the rows themselves."""
