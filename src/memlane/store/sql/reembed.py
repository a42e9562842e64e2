"""``memlane reembed --model NAME``: recompute every vector of a store with another model. The
steps, written once for every backend; each is safe to interrupt:

1. **Stage.** Memories are embedded in batches (their stored text, as the write path embeds it)
   into a staging table ``reembed_staging (id, content_hash, embedding)``, one committed
   transaction per batch; ``meta`` records the target (``reembed.target`` =
   ``<model>|<dimension>``). The store keeps working with its old model meanwhile.
2. **Resume.** A new run for the same target embeds only the memories not staged yet, or whose
   ``content_hash`` changed since they were staged (a memory replaced meanwhile); a run for
   another target starts the staging anew.
3. **Switch,** in one transaction: the memories still unstaged are embedded, every row's
   ``embedding`` is replaced by its staged vector (the backend's step: :class:`Backend`),
   ``meta`` gets the new ``embedding.model`` / ``embedding.dimension``, and the staging table is
   dropped. Either all vectors and the recorded model change, or nothing does: a store never
   holds vectors of two models.

Stop other processes that write to the store (``memlane serve``, hooks) before the switch: a
process opened before it still embeds with the model it opened with.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from memlane.embeddings.base import Embedder, embed_texts
from memlane.errors import EmbeddingError
from memlane.store.sql.dialect import Q

STAGING = "reembed_staging"
#: Memories not staged yet, or replaced since they were staged.
PENDING = (
    "SELECT m.id, m.content, m.content_hash FROM memories m LEFT JOIN reembed_staging s "
    "ON s.id = m.id WHERE s.id IS NULL OR s.content_hash <> m.content_hash ORDER BY m.num"
)


@dataclass(frozen=True, slots=True)
class ReembedAsk:
    """One re-embedding run, as every backend's entry point takes it: the new model
    (``embedder``), memories per batch (one committed transaction each), how long to wait for
    the write lock (ms), and ``progress(done, total)``, called after each batch."""

    embedder: Embedder
    batch_size: int = 256
    busy_timeout_ms: int = 60_000
    progress: Callable[[int, int], None] | None = None


@dataclass(frozen=True, slots=True)
class ReembedResult:
    """What a run did: ``memories`` in the store, ``embedded`` by this run (the rest were staged
    by an earlier, interrupted run), the model before and after."""

    memories: int
    embedded: int
    resumed: int
    old_model: str
    new_model: str
    dimension: int


class Backend(Protocol):
    """What a backend supplies to a run."""

    #: ``CREATE TABLE IF NOT EXISTS reembed_staging (...)`` with the backend's vector type.
    staging_ddl: str

    def locked(self, exclusive: bool = False) -> AbstractContextManager[object]:
        """One write transaction on the run's handle; ``exclusive`` (the switch): other
        writers wait until it ends (readers may go on)."""
        ...

    def switch(self, q: Q, dimension: int) -> None:
        """Inside the switch's transaction: every ``memories.embedding`` from the staged vectors
        (SQLite: bump the change numbers and the store id; PostgreSQL: retype the column,
        rebuild the HNSW index)."""
        ...


def check_batch(rows: list[Any], vectors: np.ndarray) -> None:
    """One vector per row, or :class:`EmbeddingError` (nothing of the batch is staged)."""
    if vectors.ndim != 2 or len(vectors) != len(rows):
        raise EmbeddingError(f"expected {len(rows)} vectors, got shape {vectors.shape}")


def _stage(q: Q, rows: list[Any], vectors: np.ndarray) -> None:
    check_batch(rows, vectors)
    q.many(
        f"INSERT INTO {STAGING} (id, content_hash, embedding) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET content_hash = excluded.content_hash, "
        "embedding = excluded.embedding",
        [
            (r[0], r[2], q.dialect.vec_in(np.ascontiguousarray(v, dtype=np.float32)))
            for r, v in zip(rows, vectors, strict=True)
        ],
    )


def run(q: Q, backend: Backend, ask: ReembedAsk) -> ReembedResult:
    """The three steps (module docstring) on ``q`` (outside a transaction). Raises
    :class:`EmbeddingError` (what was staged stays) and the driver's errors."""
    embedder, batch_size, progress = ask.embedder, ask.batch_size, ask.progress
    meta = {str(k): str(v) for k, v in q.all("SELECT key, value FROM meta")}
    old_model = meta.get("embedding.model", "?")
    target = f"{embedder.name}|{embedder.dimension}"
    with backend.locked():
        q.run(backend.staging_ddl)
        if meta.get("reembed.target") != target:  # a new target: start the staging anew
            q.run(f"DELETE FROM {STAGING}")
            q.run(
                "INSERT INTO meta (key, value) VALUES ('reembed.target', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (target,),
            )
    total = _count(q, "SELECT count(*) FROM memories")
    resumed = total - _count(q, f"SELECT count(*) FROM ({PENDING}) p")
    embedded = 0
    if progress:
        progress(resumed, total)
    while rows := q.all(f"{PENDING} LIMIT ?", (batch_size,)):
        vectors = embed_texts(embedder, [r[1] for r in rows], batch_size)
        with backend.locked():
            _stage(q, list(rows), vectors)
        embedded += len(rows)
        if progress:
            progress(min(total, resumed + embedded), total)
    with backend.locked(exclusive=True):
        late = q.all(PENDING)  # written or replaced since the last batch
        if late:
            _stage(q, list(late), embed_texts(embedder, [r[1] for r in late], batch_size))
            embedded += len(late)
        backend.switch(q, embedder.dimension)
        q.many(
            "UPDATE meta SET value = ? WHERE key = ?",
            [(embedder.name, "embedding.model"), (str(embedder.dimension), "embedding.dimension")],
        )
        q.run("DELETE FROM meta WHERE key = 'reembed.target'")
        q.run(f"DROP TABLE {STAGING}")
    return ReembedResult(total, embedded, resumed, old_model, embedder.name, embedder.dimension)


def _count(q: Q, sql: str) -> int:
    row = q.one(sql)
    return int(row[0]) if row else 0
