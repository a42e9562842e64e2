"""What one injection turn costs the store: round trips and statements, counted through the
store's traffic observers (:data:`memlane.store.sql.dialect.OBSERVERS`) on both backends. The
turn's store work is four whole steps: the search step's first trip (the turn's context and the
caches' catch-up), its second (the vector leg and the rows of both legs' hits), the start of the
turn's transaction, and its record with the commit (PostgreSQL: with the access counts after
the commit). On SQLite, in process, a batch of statements run one after the other under one
hold of the store's lock counts as one trip."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from conftest import Backend
from memlane.engine import MemoryEngine
from memlane.store.base import TextAsk, VectorAsk
from memlane.store.postgres.connect import configure
from memlane.store.sql import dialect
from memlane.store.sql.dialect import PgDialect
from memlane.types import MemoryType

TEXTS = [
    "The deploy pipeline runs on GitHub Actions with a staging step",
    "Alice prefers dark mode in every editor",
    "The database backups run nightly at 02:00 UTC",
    "Our API rate limit is 600 requests per minute per token",
    "The staging cluster lives in eu-west-1",
]


def _count(engine: MemoryEngine, session: str, text: str) -> tuple[int, int, int]:
    trips: list[int] = []

    def observe(backend: str, statements: int) -> None:
        trips.append(statements)

    dialect.OBSERVERS.append(observe)
    try:
        result = engine.inject(session, text)
    finally:
        dialect.OBSERVERS.remove(observe)
    return result.turn, len(trips), sum(trips)


def test_one_injection_turn_in_a_few_round_trips(store_backend: Backend) -> None:
    engine = store_backend.engine()
    for text in TEXTS:
        engine.add(text)
    engine.inject("warm", "where do the backups run?")  # the search caches, built once
    turn, trips, statements = _count(engine, "s1", "which region hosts the staging cluster?")
    print(
        f"\n{store_backend.name}: one injection turn: {trips} round trips, {statements} statements"
    )
    # The turn was counted and recorded, with what it injected.
    assert turn == 1
    events = engine.store.injection_events("default", "s1")
    assert len(events) == 1 and events[0]["memory_ids"]
    state = engine.store.session("default", "s1")
    assert set(state.injected) == set(events[0]["memory_ids"])
    # search step 1 (context + catch-up), search step 2 (vector leg + the hits' rows), start
    # (BEGIN + the session's writes and reads), record + COMMIT (+ the access counts)
    assert trips <= 4, (trips, statements)


def test_a_search_is_two_round_trips_and_a_second_turn_repeats_nothing(
    store_backend: Backend,
) -> None:
    engine = store_backend.engine()
    for text in TEXTS:
        engine.add(text)
    engine.search("backups")  # the search caches, built once
    trips: list[int] = []
    dialect.OBSERVERS.append(lambda backend, statements: trips.append(statements))
    try:
        hits = engine.search("where does the staging cluster live?")
    finally:
        dialect.OBSERVERS.pop()
    assert hits and hits[0].memory.content == TEXTS[4]
    assert len(trips) <= 2, trips  # the search step's two trips (access counts are buffered)
    # The next turn of the session sees what the first injected: nothing is injected twice.
    first = engine.inject("s2", "which region hosts the staging cluster?")
    second = engine.inject("s2", "which region hosts the staging cluster?")
    assert first.items and not {i.memory.id for i in first.items} & {
        i.memory.id for i in second.items
    }


def test_the_search_step_answers_what_the_store_answers(store_backend: Backend) -> None:
    """The step's legs, rows and cosines are the store's own (scope and type filters
    included), and arguments it was not prepared with are asked of the store."""
    engine = store_backend.engine()
    for text in TEXTS:
        engine.add(text)
    engine.add("The staging database runs PostgreSQL 16", agent="ops")
    engine.add("Staging deploys need a green pipeline first", agent="dev", type="fact")
    store, embed = engine.store, engine.embedder.embed_batch
    vec = embed(["where is the staging cluster?"])[0]
    text = "staging cluster pipeline"
    for agent, types in ((None, None), ("ops", None), ("dev", {MemoryType.FACT})):
        step = store.search_step("default", agent)
        step.prepare(
            VectorAsk("default", agent, vec, 5, types), TextAsk("default", agent, text, 5, types)
        )
        vector = step.vector_search("default", agent, vec, 5, types)
        fts = step.fts_search("default", agent, text, 5, types)
        assert vector and fts
        assert vector == store.vector_search("default", agent, vec, 5, types)
        assert fts == store.fts_search("default", agent, text, 5, types)
        ids = [h.id for h in vector + fts] + [hit.memory.id for hit in engine.search("backups")]
        assert step.get_many("default", ids) == store.get_many("default", ids)
        mine, theirs = step.cosines("default", ids, vec), store.cosines("default", ids, vec)
        assert mine.keys() == theirs.keys() == set(ids)
        assert all(abs(mine[i] - theirs[i]) < 1e-6 for i in mine)
        # not what it was prepared with: the store's answer
        other = ("default", agent, "nightly backups", 3)
        assert step.fts_search(*other) == store.fts_search(*other)


def test_a_turn_reads_memories_through_their_indexes_on_postgresql(
    postgres_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No read of ``memories`` an injection turn sends scans the table, planned on a store of
    thousands of rows with fresh statistics. One the planner cannot answer from an index (the
    turn start's ``id IN (...) OR id IN (...)`` was one) reads every memory of the owner on
    every turn: 85 ms at 93,641 memories."""
    engine = postgres_backend.engine()
    for text in TEXTS:
        engine.add(text)
    with psycopg.connect(postgres_backend.dsn, autocommit=True) as conn:
        # 5,000 forgotten copies of one memory: rows of the owner no search returns
        conn.execute(
            "INSERT INTO memories (id, owner, type, content, content_hash, importance, status, "
            "created_at, updated_at, embedding, change_seq) SELECT 'old-' || g, owner, type, "
            "content || g, md5(content || g), importance, 'forgotten', created_at, updated_at, "
            "embedding, 0 FROM memories, generate_series(1, 5000) AS g "
            "WHERE num = (SELECT min(num) FROM memories)"
        )
        conn.execute("ANALYZE")
    engine.inject("s1", "where do the backups run?")  # the caches built; the session has a window
    sent: list[tuple[str, Any]] = []
    execute = PgDialect.execute

    def recording(self: PgDialect, conn: Any, sql: str, args: Any, binary: bool) -> Any:
        sent.append((sql, args))
        return execute(self, conn, sql, args, binary)

    monkeypatch.setattr(PgDialect, "execute", recording)
    assert engine.inject("s1", "which region hosts the staging cluster?").items
    monkeypatch.undo()
    reads = [(s, a) for s, a in sent if s.lstrip().startswith("SELECT") and "memories" in s]
    assert len(reads) >= 4, [s for s, _ in sent]  # context, catch-up, legs, turn start
    with psycopg.connect(postgres_backend.dsn, autocommit=True) as conn:
        configure(conn, 40, 10_000)
        for sql, args in reads:
            plan = "\n".join(
                str(r[0]) for r in conn.execute(f"EXPLAIN {PgDialect().sql(sql)}", args).fetchall()
            )
            assert "Seq Scan on memories" not in plan, f"{sql}\n{plan}"
