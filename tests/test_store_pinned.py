"""An injection turn's pinned memories (ambient awareness: ``[injection] pinned_types``): the
first ``limit`` active memories of the types asked, newest or most important first, read by one
walk of an index per type (``memories_pinned_recent`` / ``memories_pinned_importance``), never by
a walk of every active memory of the owner (245 ms a turn at 93,641 memories, sorted by
importance, before those indexes)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from conftest import Backend
from memlane import HashEmbedder, MemoryType, PinnedSort
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.embeddings import embed_texts
from memlane.store import MemoryStore, NewMemory
from memlane.store.base import PinnedQuery
from memlane.store.postgres.connect import configure
from memlane.store.sql.dialect import Dialect, PgDialect
from memlane.store.sqlite import SQLiteStore

EMB = HashEmbedder()
PREF, IDENT, FACT = MemoryType.PREFERENCE, MemoryType.IDENTITY, MemoryType.FACT


def _add(store: MemoryStore, rows: list[tuple[str, MemoryType, float, int, str | None]]) -> None:
    """``(text, type, importance, minutes ago, agent)`` rows, in one transaction."""
    now = utcnow()
    vectors = embed_texts(EMB, [r[0] for r in rows])
    with store.transaction():
        for (text, kind, importance, ago, agent), vector in zip(rows, vectors, strict=True):
            memory = NewMemory(
                new_id(), text, content_hash(text), kind, importance, "default", agent, None,
                None, now - timedelta(minutes=ago),
            )  # fmt: skip
            store.insert(memory, vector)


def _pinned(store: MemoryStore, types: list[MemoryType], sort: PinnedSort, **kw: Any) -> list[str]:
    query = PinnedQuery(types, kw.pop("limit", 2), sort)
    context = store.turn_context("default", "s", kw.pop("agent", None), query)
    return [m.content for m in context.pinned]


def test_pinned_memories_are_the_first_of_all_the_types_asked(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    _add(
        store,
        [
            ("prefers dark mode", PREF, 0.9, 30, None),
            ("prefers tabs over spaces", PREF, 0.5, 1, None),
            ("prefers green tea", PREF, 0.7, 20, "other-agent"),
            ("is called Alice", IDENT, 0.8, 10, None),
            ("works at Acme", IDENT, 0.95, 40, None),
            ("the build takes ten minutes", FACT, 1.0, 0, None),
        ],
    )
    importance = PinnedSort.IMPORTANCE
    assert _pinned(store, [PREF, IDENT], importance) == ["works at Acme", "prefers dark mode"]
    assert _pinned(store, [PREF, IDENT], PinnedSort.RECENT) == [
        "prefers tabs over spaces",
        "is called Alice",
    ]
    assert _pinned(store, [PREF], importance, limit=5) == [
        "prefers dark mode",
        "prefers green tea",
        "prefers tabs over spaces",
    ]
    # another agent's memory is out of an agent's scope; its own and shared ones are in
    assert "prefers green tea" not in _pinned(store, [PREF], importance, limit=5, agent="me")
    assert _pinned(store, [PREF], importance, agent="other-agent") == [
        "prefers dark mode",
        "prefers green tea",
    ]
    assert _pinned(store, [MemoryType.GOAL], importance) == []


def test_pinned_memories_are_read_through_their_indexes(
    store_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pinned statement's plan walks the pinned indexes, on a store of 3,000 facts and a
    few preferences (PostgreSQL: with fresh statistics)."""
    store = store_backend.open_store(EMB)
    _add(store, [(f"fact number {i} about kites", FACT, 0.5, i, None) for i in range(3000)])
    _add(
        store, [("prefers dark mode", PREF, 0.9, 5, None), ("is called Alice", IDENT, 0.8, 9, None)]
    )
    sent: list[tuple[str, Any]] = []
    for cls in (Dialect, PgDialect):
        execute = cls.execute

        def recording(
            self: Dialect, conn: Any, sql: str, args: Any, binary: bool, f: Any = execute
        ) -> Any:
            sent.append((sql, args))
            return f(self, conn, sql, args, binary)

        monkeypatch.setattr(cls, "execute", recording)
    for sort in PinnedSort:
        assert _pinned(store, [PREF, IDENT, MemoryType.GOAL], sort)
    monkeypatch.undo()
    pinned = [(s, a) for s, a in sent if "ORDER BY" in s and "type = ?" in s]
    assert len(pinned) == 2, [s for s, _ in sent]
    for sql, args in pinned:
        if isinstance(store, SQLiteStore):
            rows = store.db.conn.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall()
            plan = "\n".join(str(r[3]) for r in rows)
            assert "SCAN memories" not in plan, plan
        else:
            with psycopg.connect(store_backend.dsn, autocommit=True) as conn:
                conn.execute("ANALYZE memories")
                configure(conn, 40, 10_000)
                rows = conn.execute(f"EXPLAIN {PgDialect().sql(sql)}", args).fetchall()
            plan = "\n".join(str(r[0]) for r in rows)
            assert "Seq Scan on memories" not in plan, plan
        assert plan.count("memories_pinned_") == 3, plan  # one walk per type
