"""``memlane reembed --model NAME``: recompute every vector of a store with another model.

SQLite stores (the ``[store] backend = "sqlite"`` file). The steps, each safe to interrupt:

1. **Stage.** Memories are embedded in batches (their stored text, as the write path embeds it)
   into a staging table ``reembed_staging (id, content_hash, embedding)`` of the same file, one
   committed transaction per batch; ``meta`` records the target (``reembed.target`` =
   ``<model>|<dimension>``). The store keeps working with its old model meanwhile.
2. **Resume.** A new run for the same target embeds only the memories not staged yet, or whose
   ``content_hash`` changed since they were staged (a memory replaced meanwhile); a run for another
   target starts the staging anew.
3. **Switch,** in one write transaction: the memories still unstaged are embedded, every row's
   ``embedding`` is replaced by its staged vector (and its ``vec_seq`` bumped), ``meta`` gets the
   new ``embedding.model`` / ``embedding.dimension`` and a new ``store.uuid`` (so the saved search
   indexes, tied to the old id, are rebuilt from the rows at the next open), and the staging table
   is dropped. Either all vectors and the recorded model change, or nothing does: a store never
   holds vectors of two models.

Stop other processes that write to the store (``memlane serve``, hooks) before the switch: a
process opened before it still embeds with the model it opened with.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memlane._ids import new_id
from memlane.embeddings.base import Embedder, embed_texts
from memlane.errors import EmbeddingError, InvalidArgument, StoreError

_STAGING = "reembed_staging"
#: Memories not staged yet, or replaced since they were staged (both backends' SQL).
PENDING = (
    "SELECT m.id, m.content, m.content_hash FROM memories m LEFT JOIN reembed_staging s "
    "ON s.id = m.id WHERE s.id IS NULL OR s.content_hash <> m.content_hash ORDER BY m.num"
)


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


def reembed(
    db_path: Path,
    embedder: Embedder,
    *,
    batch_size: int = 256,
    busy_timeout_ms: int = 60_000,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedResult:
    """Re-embed every memory of the SQLite store at ``db_path`` with ``embedder`` and switch the
    store's recorded model to it (see the module docstring). ``progress(done, total)`` is called
    after each batch.

    Raises:
        InvalidArgument: no store at ``db_path``.
        EmbeddingError: the model failed (what was staged stays; run again to resume).
        StoreError: the file is not a memlane store, or is locked past ``busy_timeout_ms``.
    """
    if not db_path.is_file():
        raise InvalidArgument(f"no store at {db_path}: nothing to re-embed")
    conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=busy_timeout_ms / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        return _run(conn, db_path, embedder, batch_size, progress)
    except sqlite3.Error as exc:
        raise StoreError(f"{db_path}: re-embedding failed: {exc}", operation="reembed") from exc
    finally:
        conn.close()


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error as exc:
        raise StoreError(f"not a memlane store ({exc})", operation="reembed") from exc


def _run(
    conn: sqlite3.Connection,
    db_path: Path,
    embedder: Embedder,
    batch_size: int,
    progress: Callable[[int, int], None] | None,
) -> ReembedResult:
    meta = _meta(conn)
    old_model = meta.get("embedding.model", "?")
    target = f"{embedder.name}|{embedder.dimension}"
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_STAGING} "
            "(id TEXT PRIMARY KEY, content_hash TEXT NOT NULL, embedding BLOB NOT NULL)"
        )
        if meta.get("reembed.target") != target:  # a new target: start the staging anew
            conn.execute(f"DELETE FROM {_STAGING}")
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('reembed.target', ?)", (target,)
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    total = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
    resumed = total - len(conn.execute(PENDING).fetchall())
    embedded = 0
    if progress:
        progress(resumed, total)
    while True:
        rows = conn.execute(f"{PENDING} LIMIT ?", (batch_size,)).fetchall()
        if not rows:
            break
        vectors = embed_texts(embedder, [r[1] for r in rows], batch_size)
        conn.execute("BEGIN IMMEDIATE")
        try:
            _stage(conn, rows, vectors)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        embedded += len(rows)
        if progress:
            progress(min(total, resumed + embedded), total)
    conn.execute("BEGIN IMMEDIATE")
    try:
        late = conn.execute(PENDING).fetchall()  # written or replaced since the last batch
        if late:
            _stage(conn, late, embed_texts(embedder, [r[1] for r in late], batch_size))
            embedded += len(late)
        base = int(conn.execute("SELECT coalesce(max(vec_seq), 0) FROM memories").fetchone()[0])
        conn.execute(
            "UPDATE memories SET embedding = (SELECT s.embedding FROM reembed_staging s "
            "WHERE s.id = memories.id), vec_seq = ? + num",
            (base,),
        )
        for key, value in (
            ("embedding.model", embedder.name),
            ("embedding.dimension", str(embedder.dimension)),
            ("store.uuid", new_id()),
        ):
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
        conn.execute("DELETE FROM meta WHERE key = 'reembed.target'")
        conn.execute(f"DROP TABLE {_STAGING}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    # The saved indexes carry the old store id and are ignored from now on: remove the files.
    shutil.rmtree(db_path.with_name(db_path.name + ".vec"), ignore_errors=True)
    return ReembedResult(total, embedded, resumed, old_model, embedder.name, embedder.dimension)


def check_batch(rows: list[tuple[str, str, str]], vectors: np.ndarray) -> None:
    """One vector per row, or :class:`EmbeddingError` (nothing of the batch is staged)."""
    if vectors.ndim != 2 or len(vectors) != len(rows):
        raise EmbeddingError(f"expected {len(rows)} vectors, got shape {vectors.shape}")


def _stage(conn: sqlite3.Connection, rows: list[tuple[str, str, str]], vectors: np.ndarray) -> None:
    check_batch(rows, vectors)
    conn.executemany(
        f"INSERT OR REPLACE INTO {_STAGING} (id, content_hash, embedding) VALUES (?, ?, ?)",
        [
            (r[0], r[2], np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for r, v in zip(rows, vectors, strict=True)
        ],
    )
