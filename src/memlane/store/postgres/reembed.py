"""``memlane reembed`` on a PostgreSQL store: the steps of :mod:`memlane.store.sql.reembed`, with
PostgreSQL's staging table (an unsized ``vector``: the new model's dimension may differ from the
column's) and switch: ``memories`` locked against writers (``EXCLUSIVE``: reads go on until the
column changes), the HNSW index dropped, the column retyped to ``vector(<new dim>)`` with the
staged vectors, the index built again with its old parameters (``m``, ``ef_construction``).

The switch rebuilds the HNSW graph while it holds the table (minutes at a million memories: stop
``memlane serve`` and hooks first, as for SQLite).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from memlane.errors import StoreError
from memlane.store.postgres.connect import configure
from memlane.store.postgres.database import PostgresDialect
from memlane.store.postgres.errors import describe, translate
from memlane.store.sql import reembed as steps
from memlane.store.sql.dialect import Q

_HNSW = "memories_embedding_hnsw"


class _Postgres:
    staging_ddl = (
        f"CREATE TABLE IF NOT EXISTS {steps.STAGING} "
        "(id text PRIMARY KEY, content_hash text NOT NULL, embedding vector NOT NULL)"
    )

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    @contextmanager
    def locked(self, exclusive: bool = False) -> Iterator[None]:
        with self.conn.transaction():
            if exclusive:
                self.conn.execute("LOCK TABLE memories IN EXCLUSIVE MODE")  # readers go on
            yield

    def switch(self, q: Q, dimension: int) -> None:
        index = q.one(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?",
            (_HNSW,),
        )
        if index is not None:
            q.run(f"DROP INDEX {_HNSW}")
        q.run("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")
        q.run(
            f"UPDATE memories m SET embedding = s.embedding FROM {steps.STAGING} s "
            "WHERE s.id = m.id"
        )
        q.run(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dimension)})")
        if index is not None:
            q.run(str(index[0]))


def reembed_postgres(dsn: str, ask: steps.ReembedAsk) -> steps.ReembedResult:
    """Re-embed every memory of the PostgreSQL store at ``dsn`` with ``ask.embedder`` (module
    docstring) and switch the store's recorded model to it.

    Raises:
        EmbeddingError: the model failed (what was staged stays; run again to resume).
        StoreError: the server cannot be reached, the database is not a memlane store, or a
            statement failed (the transaction under way is rolled back).
    """
    where = describe(dsn)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            configure(conn, 40, ask.busy_timeout_ms)
            q = Q(conn, PostgresDialect())
            if not (row := q.one("SELECT to_regclass('meta') IS NOT NULL")) or not row[0]:
                raise StoreError(f"{where} is not a memlane store", operation="reembed")
            return steps.run(q, _Postgres(conn), ask)
    except psycopg.Error as exc:
        raise translate(exc, "reembed", where) from exc
