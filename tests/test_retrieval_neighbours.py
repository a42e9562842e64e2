"""The neighbour leg of hybrid search: the memories written just before and after a top hit in
the same session join the results (a question's evidence often spans adjacent turns)."""

from __future__ import annotations

from collections.abc import Callable

from memlane import MemoryEngine

SESSION_1 = [
    "Nora booked a cabin near the lake",
    "The roof of the cabin leaks when it rains",
    "Nora plans to fish for trout every morning",
]
#: Memories that share a word with the query: they fill the legs' 10 candidates, so the roof
#: memory (no word in common with the query) is no candidate of either leg.
FILLERS = [
    f"{name} watched a film about trout"
    for name in ("Ann", "Ben", "Cid", "Dot", "Eve", "Fay", "Gus", "Hal", "Ida")
]
QUERY = "Nora plans to fish for trout every morning"
#: No relevance floor (the hash embedder gives the roof memory a cosine near 0 to the query) and
#: no graph leg (the fillers are linked to one another as near repeats).
OPEN = {"floor_relative": 0.0, "floor_absolute": -1.0, "graph_weight": 0.0}


def _fill(engine: MemoryEngine) -> None:
    for text in SESSION_1:
        engine.add(text, session="s1")
    for text in FILLERS:
        engine.add(text, session="s2")


def test_a_hits_session_neighbours_join_the_results(
    make_engine: Callable[..., MemoryEngine],
) -> None:
    engine = make_engine(retrieval={**OPEN, "neighbour_seeds": 1, "neighbour_weight": 1.0})
    _fill(engine)
    hits = engine.search(QUERY, limit=10)
    contents = [h.memory.content for h in hits]
    assert contents[0] == SESSION_1[2]
    # written just before the top hit in the same session: found though it shares no word
    neighbour = next(h for h in hits if h.memory.content == SESSION_1[1])
    assert neighbour.ranks == {"neighbour": 1}
    assert neighbour.score <= hits[0].score
    # the filler written just after the top hit is in another session: no neighbour of it
    assert all(h.ranks != {"neighbour": 2} for h in hits)


def test_the_leg_can_be_turned_off(make_engine: Callable[..., MemoryEngine]) -> None:
    engine = make_engine(retrieval={**OPEN, "neighbour_seeds": 0})
    _fill(engine)
    contents = [h.memory.content for h in engine.search(QUERY, limit=10)]
    assert SESSION_1[1] not in contents
    # vector and full-text modes never add neighbours
    on = make_engine(retrieval={**OPEN, "neighbour_seeds": 3, "neighbour_weight": 1.0})
    _fill(on)
    for mode in ("vector", "fts"):
        hits = on.search(QUERY, limit=10, mode=mode)
        assert all("neighbour" not in h.ranks for h in hits)
