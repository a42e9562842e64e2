"""What one injection turn costs the store: round trips and statements, counted through the
store's traffic observers (:data:`memlane.store.sql.dialect.OBSERVERS`) on both backends. The
turn's store work is three whole steps (context, start, finish: one round trip each on
PostgreSQL) around the retrieval's legs."""

from __future__ import annotations

from conftest import Backend
from memlane.engine import MemoryEngine
from memlane.store.sql import dialect

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
    # PostgreSQL: context 1, start (BEGIN + the session's writes and reads) 1, finish + COMMIT 1,
    # the access counts 1, and the retrieval's legs (vectors, the BM25 catch-up and its rows,
    # the hits' rows, links).
    limit = 10 if store_backend.name == "postgres" else 16
    assert trips <= limit
