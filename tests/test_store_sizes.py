"""Calls that take many ids accept any number: the SQLite backend chunks every ``IN (...)`` list
(memlane.store.base.CHUNK). The connection's bound-parameter limit is lowered to SQLite's old
default of 999 (this build allows far more), so an unchunked list fails here."""

from __future__ import annotations

import itertools
import sqlite3

import numpy as np

from conftest import Backend
from memlane import HashEmbedder, MemoryType, PinnedSort, Relation
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.embeddings import embed_texts
from memlane.store import NewMemory
from memlane.store.base import CHUNK, PinnedQuery
from memlane.store.sqlite import SQLiteStore

N = 2 * CHUNK + 250  # three chunks, and more than 999 ids


def _insert(store: SQLiteStore, texts: list[str], vectors: np.ndarray) -> list[str]:
    """Insert ``texts`` as they are (no dedup) in the open transaction; their ids."""
    return [
        store.insert(
            NewMemory(new_id(), t, content_hash(t), MemoryType.FACT, 0.5, "default", None,
                      None, None, utcnow()),
            v,
        ).id
        for t, v in zip(texts, vectors, strict=True)
    ]  # fmt: skip


def test_more_ids_than_sqlite_binds_in_one_statement(sqlite_backend: Backend) -> None:
    emb = HashEmbedder()
    store = sqlite_backend.open_store(emb)
    assert isinstance(store, SQLiteStore)
    store.db.conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    texts = [f"note {i} about the kite festival in town {i % 7}" for i in range(N)]
    vectors = embed_texts(emb, texts)
    with store.transaction():
        ids = _insert(store, texts, vectors)
        for a, b in itertools.pairwise(ids):
            store.add_association("default", a, b, Relation.RELATED_TO, 0.5)
        # nearest inside the transaction: every row pending, read back in chunks
        assert len(store.nearest("default", None, vectors[0], N)) == N
    many = [*ids, *ids[:10], "missing"]
    assert len(store.get_many("default", many)) == N
    assert len(store.embeddings("default", many)) == N
    assert len(store.cosines("default", many, vectors[0])) == N
    assert len(store.neighbours("default", many)) == N - 1
    assert len(store.vector_search("default", None, vectors[0], N)) == N
    assert len(store.nearest("default", None, vectors[0], N)) == N
    assert len(store.fts_search("default", None, "kite festival", N)) == N
    types = [MemoryType.FACT] * 1200
    pinned = PinnedQuery(types, N, PinnedSort.RECENT)
    assert len(store.turn_context("default", "s", None, pinned).pinned) == N
    # a turn's start reads the vectors of any number of candidates
    assert len(store.start_turn("default", "s", 2, many).vectors) == N
    assert np.isclose(store.cosines("default", ids[:1], vectors[0])[ids[0]], 1.0, atol=1e-5)


def test_reads_by_key_use_the_key_index_not_a_walk_of_the_owner(sqlite_backend: Backend) -> None:
    """A read of a few memories by id or row number must go through the key's index. SQLite's
    planner otherwise picks an owner index for an ``IN`` list of 3 keys or more and reads every
    memory of the owner (100 ms a call at 100,000 memories: the janitor's merges, the
    hydration of search hits)."""
    emb = HashEmbedder()
    store = sqlite_backend.open_store(emb)
    assert isinstance(store, SQLiteStore)
    texts = [f"note {i} about the kite festival in town {i % 7}" for i in range(200)]
    vectors = embed_texts(emb, texts)
    with store.transaction():
        ids = _insert(store, texts, vectors)
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    try:
        assert len(store.get_many("default", ids[:5])) == 5
        assert len(store.embeddings("default", ids[:5])) == 5
        assert len(store.vector_search("default", None, vectors[0], 20)) == 20
        assert len(store.fts_search("default", None, "kite festival", 20)) == 20
    finally:
        store.db.conn.set_trace_callback(None)
    by_key = [s for s in statements if "FROM memories" in s and " IN (" in s]
    assert len(by_key) >= 3
    for sql in by_key:
        plan = " ".join(r[3] for r in store.db.conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "(owner=?)" not in plan and ("PRIMARY KEY" in plan or "autoindex" in plan), (
            sql,
            plan,
        )
