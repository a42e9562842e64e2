"""PostgreSQL + pgvector implementation of :class:`~memlane.store.base.MemoryStore`: the one SQL
implementation (:class:`~memlane.store.sql.store.SQLStore`) over PostgreSQL's dialect and
connections (:mod:`.database`: the pool, the per-owner writer lock, the HNSW vector leg).

Full text: the backend-neutral BM25 index (:mod:`memlane.store.text_index`), one per owner and
process, caught up from ``change_seq`` before every search. PostgreSQL's ``ts_rank`` is not BM25;
ranking with the same index as SQLite keeps the two backends' results the same (measured:
docs/postgres.md). The ``fts`` tsvector column and its GIN index serve SQL-side queries.

Concurrent turns of one session are serialised by the row lock of the session's ``sessions``
row (``begin_turn`` upserts it first thing in the turn's transaction): the second turn reads
what the first injected only after it committed, so the same memory is never injected twice.
"""

from __future__ import annotations

import functools

import psycopg
from psycopg_pool import ConnectionPool

from memlane.errors import StoreError
from memlane.store.postgres import migrations
from memlane.store.postgres.connect import configure
from memlane.store.postgres.database import OWNER_LOCK, PostgresDatabase, SqlLeg
from memlane.store.postgres.errors import describe, translate
from memlane.store.sql.store import SQLStore

__all__ = ["OWNER_LOCK", "PostgresStore"]


class PostgresStore(SQLStore[PostgresDatabase]):
    """The server store. Use :meth:`open`; thread-safe (a pool of connections, :attr:`db`)."""

    dsn: str

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
        db = PostgresDatabase(
            dsn, pool, where, busy_timeout_ms=busy_timeout_ms, ef_search=hnsw_ef_search
        )
        store = cls(
            db,
            lambda db_, cache, memories: SqlLeg(db, memories),
            model=model,
            dimension=dimension,
        )
        store.dsn = dsn
        try:
            store.check_model()
        except BaseException:
            db.close()
            raise
        return store
