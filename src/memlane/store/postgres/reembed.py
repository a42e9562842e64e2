"""``memlane reembed`` on a PostgreSQL store: the steps of :mod:`memlane.reembed` in SQL.

1. **Stage**: batches of vectors into ``reembed_staging (id, content_hash, embedding vector)``
   (an unsized ``vector``: the new model's dimension may differ from the column's), one committed
   transaction per batch, ``meta`` holding the target (``reembed.target`` = ``<model>|<dim>``).
   The store keeps working with its old model meanwhile.
2. **Resume**: a run for the same target embeds only the memories not staged yet or replaced
   since; a run for another target stages anew.
3. **Switch**, one transaction: ``memories`` locked against writers (``EXCLUSIVE``: reads go on
   until the column changes), the late memories embedded, the HNSW index dropped, the column
   retyped to ``vector(<new dim>)`` with the staged vectors, the index built again with its old
   parameters (``m``, ``ef_construction``), ``meta`` given the new model, the staging table
   dropped. Either everything changes or nothing: a store never holds vectors of two models.

The switch rebuilds the HNSW graph while it holds the table (minutes at a million memories: stop
``memlane serve`` and hooks first, as for SQLite).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg

from memlane.embeddings.base import Embedder, embed_texts
from memlane.errors import StoreError
from memlane.reembed import PENDING, check_batch
from memlane.store.postgres.connect import configure
from memlane.store.postgres.errors import describe, translate

_STAGING = "reembed_staging"
_HNSW = "memories_embedding_hnsw"


def reembed_postgres(
    dsn: str,
    embedder: Embedder,
    *,
    batch_size: int = 256,
    busy_timeout_ms: int = 60_000,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int, int, str]:
    """Re-embed every memory of the PostgreSQL store at ``dsn`` (module docstring); returns
    ``(memories, embedded by this run, staged by an earlier run, the old model)``.

    Raises:
        EmbeddingError: the model failed (what was staged stays; run again to resume).
        StoreError: the server cannot be reached, the database is not a memlane store, or a
            statement failed (the transaction under way is rolled back).
    """
    where = describe(dsn)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            configure(conn, 40, busy_timeout_ms)
            return _run(conn, embedder, batch_size, progress)
    except psycopg.Error as exc:
        raise translate(exc, "reembed", where) from exc


def _run(
    conn: psycopg.Connection[Any],
    embedder: Embedder,
    batch_size: int,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, int, int, str]:
    if conn.execute("SELECT to_regclass('meta')").fetchone() in (None, (None,)):
        raise StoreError(f"{describe(conn.info.dsn)} is not a memlane store", operation="reembed")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    old_model = meta.get("embedding.model", "?")
    target = f"{embedder.name}|{embedder.dimension}"
    with conn.transaction():
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_STAGING} "
            "(id text PRIMARY KEY, content_hash text NOT NULL, embedding vector NOT NULL)"
        )
        if meta.get("reembed.target") != target:  # a new target: stage anew
            conn.execute(f"TRUNCATE {_STAGING}")
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('reembed.target', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (target,),
            )
    total = _count(conn, "SELECT count(*) FROM memories")
    resumed = total - _count(conn, f"SELECT count(*) FROM ({PENDING}) p")
    embedded = 0
    if progress:
        progress(resumed, total)
    while rows := conn.execute(f"{PENDING} LIMIT %s", (batch_size,)).fetchall():
        vectors = embed_texts(embedder, [r[1] for r in rows], batch_size)
        with conn.transaction():
            _stage(conn, rows, vectors)
        embedded += len(rows)
        if progress:
            progress(min(total, resumed + embedded), total)
    with conn.transaction():
        conn.execute("LOCK TABLE memories IN EXCLUSIVE MODE")  # writers wait; readers go on
        late = conn.execute(PENDING).fetchall()  # written or replaced since the last batch
        if late:
            _stage(conn, late, embed_texts(embedder, [r[1] for r in late], batch_size))
            embedded += len(late)
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname = %s",
            (_HNSW,),
        ).fetchone()
        if index is not None:
            conn.execute(f"DROP INDEX {_HNSW}")
        conn.execute("ALTER TABLE memories ALTER COLUMN embedding TYPE vector")
        conn.execute(
            f"UPDATE memories m SET embedding = s.embedding FROM {_STAGING} s WHERE s.id = m.id"
        )
        conn.execute(
            f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(embedder.dimension)})"
        )
        if index is not None:
            conn.execute(index[0])
        for key, value in (
            ("embedding.model", embedder.name),
            ("embedding.dimension", str(embedder.dimension)),
        ):
            conn.execute("UPDATE meta SET value = %s WHERE key = %s", (value, key))
        conn.execute("DELETE FROM meta WHERE key = 'reembed.target'")
        conn.execute(f"DROP TABLE {_STAGING}")
    return total, embedded, resumed, old_model


def _count(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _stage(conn: psycopg.Connection[Any], rows: list[Any], vectors: np.ndarray) -> None:
    check_batch(rows, vectors)
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {_STAGING} (id, content_hash, embedding) VALUES (%s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET content_hash = excluded.content_hash, "
            "embedding = excluded.embedding",
            [
                (r[0], r[2], np.ascontiguousarray(v, dtype=np.float32))
                for r, v in zip(rows, vectors, strict=True)
            ],
        )
