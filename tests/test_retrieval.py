"""Hybrid search (ARTICLE.md "Read path"): modes, query escaping, scoping, ranks, the relevance
floor, the graph leg, access recording."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conftest import Backend
from memlane import InvalidArgument, MemoryEngine, MemoryInput, Relation

MakeEngine = Callable[..., MemoryEngine]

DARK = "Alice prefers dark mode in every editor"
BASEMENT = "The basement is dark and cold in winter"
TEA = "Bob drinks green tea every afternoon"
QUERY = "dark mode editor preference"


@pytest.fixture
def filled(engine: MemoryEngine) -> MemoryEngine:
    for text in (DARK, BASEMENT, TEA):
        engine.add(text)
    return engine


def contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.memory.content for h in hits]


# --- modes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "legs"), [("hybrid", {"vector", "fts"}), ("vector", {"vector"})])
def test_modes_find_the_memory(filled: MemoryEngine, mode: str, legs: set[str]) -> None:
    hits = filled.search(QUERY, mode=mode)
    assert contents(hits)[0] == DARK
    assert set(hits[0].ranks) == legs
    assert hits[0].ranks[next(iter(legs))] == 1


def test_fts_mode_uses_only_the_full_text_leg(filled: MemoryEngine) -> None:
    hits = filled.search(QUERY, mode="fts")
    assert contents(hits) == [DARK, BASEMENT]  # both say "dark"; BM25 puts the better one first
    assert all(set(h.ranks) == {"fts"} for h in hits)
    assert [h.ranks["fts"] for h in hits] == [1, 2]
    assert filled.search("tea afternoon", mode="fts")[0].memory.content == TEA
    assert filled.search("teas", mode="fts")[0].memory.content == TEA  # porter stemming


def test_hits_are_ordered_and_well_formed(filled: MemoryEngine) -> None:
    hits = filled.search(QUERY, mode="fts")
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for h in filled.search(QUERY) + hits:
        assert set(h.ranks) <= {"vector", "fts", "graph", "neighbour"}
        assert all(isinstance(r, int) and r >= 1 for r in h.ranks.values())
        assert -1.0 <= h.similarity <= 1.0 + 1e-6
        assert h.score > 0


def test_limit_and_types(engine: MemoryEngine) -> None:
    for i in range(15):
        engine.add(f"Project orion milestone {i} was reviewed by the {i}th team", type="event")
    engine.add("Project orion is the top goal this quarter", type="goal")
    assert len(engine.search("project orion", limit=5)) == 5
    assert len(engine.search("project orion", limit=100)) == 16
    goal = engine.search("project orion", types=["goal"])
    assert contents(goal) == ["Project orion is the top goal this quarter"]
    with pytest.raises(InvalidArgument, match="valid types"):
        engine.search("project orion", types=["opinion"])
    for bad in (0, -1, 1001):
        with pytest.raises(InvalidArgument, match="limit"):
            engine.search("project orion", limit=bad)


# --- bad input ---------------------------------------------------------------------------------

NASTY_QUERIES = [
    "NEAR(",
    "NEAR(dark mode, 2)",
    '"',
    '"dark',
    'dark "mode',
    "AND OR NOT",
    "dark AND NOT mode",
    "*",
    "dark*",
    "col:",
    "content:dark",
    "memories_fts:dark",
    "^dark",
    "(dark OR",
    ")",
    "{dark mode}",
    "-dark",
    "+",
    "dark - mode",
    "'",
    "a'b",
    "ünïcödé ☃ 日本語 مرحبا",
    "😀 dark 🎉",
    "\x00dark",
    "dark\nmode\tthing",
    "x" * 5000,
    "; DROP TABLE memories; --",
]


@pytest.mark.parametrize("query", NASTY_QUERIES)
@pytest.mark.parametrize("mode", ["hybrid", "fts", "vector"])
def test_query_syntax_never_raises(filled: MemoryEngine, query: str, mode: str) -> None:
    hits = filled.search(query, mode=mode)
    assert all(h.memory.owner == "default" for h in hits)
    if mode != "vector" and "dark" in query and "x" * 10 not in query:
        assert DARK in contents(hits)  # the words are still searched for
    assert filled.count() == 3  # the injection-looking query did nothing


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_invalid(filled: MemoryEngine, query: str) -> None:
    with pytest.raises(InvalidArgument, match="empty"):
        filled.search(query)


def test_unknown_mode_is_invalid(filled: MemoryEngine) -> None:
    with pytest.raises(InvalidArgument, match="hybrid, vector, fts"):
        filled.search(QUERY, mode="semantic")


def test_only_stop_words_is_not_an_error(filled: MemoryEngine) -> None:
    assert filled.search("the and of", mode="fts") == []
    filled.search("the and of")


# --- scope -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "vector", "fts"])
def test_owner_isolation(engine: MemoryEngine, mode: str) -> None:
    mine = engine.add(DARK, owner="alice").memory
    theirs = engine.add(DARK, owner="mallory").memory
    engine.add(TEA, owner="mallory")
    hits = engine.search(QUERY, owner="alice", mode=mode)
    assert [h.memory.id for h in hits] == [mine.id]
    assert [h.memory.id for h in engine.search(QUERY, owner="mallory", mode=mode)] == [theirs.id]
    assert engine.search(QUERY, owner="nobody", mode=mode) == []


@pytest.mark.parametrize("mode", ["hybrid", "vector", "fts"])
def test_agent_sees_its_own_and_shared(engine: MemoryEngine, mode: str) -> None:
    shared = engine.add("Release train leaves every friday", owner="acme").memory
    coder = engine.add("Release branch for the coder is cut on friday", agent="coder", owner="acme")
    writer = engine.add("Release notes by the writer are due friday", agent="writer", owner="acme")
    query = "release friday"
    seen = {h.memory.id for h in engine.search(query, owner="acme", agent="coder", mode=mode)}
    assert seen == {shared.id, coder.memory.id}
    seen = {h.memory.id for h in engine.search(query, owner="acme", agent="writer", mode=mode)}
    assert seen == {shared.id, writer.memory.id}
    everyone = {h.memory.id for h in engine.search(query, owner="acme", mode=mode)}
    assert everyone == {shared.id, coder.memory.id, writer.memory.id}


# --- relevance floor, graph leg ----------------------------------------------------------------


def test_relative_floor_drops_unrelated_hits(store_backend: Backend) -> None:
    engine = store_backend.engine()
    for text in (DARK, BASEMENT, TEA):
        engine.add(text)
    # BASEMENT shares the word "dark" (the full-text leg finds it) but is far from the query
    assert BASEMENT in contents(engine.search(QUERY, mode="fts"))
    hits = engine.search(QUERY)
    assert contents(hits) == [DARK]
    best = hits[0].similarity
    assert all(h.similarity >= best * engine.settings.retrieval.floor_relative for h in hits)
    # without the floor it would have been returned: the floor is what removed it
    loose = store_backend.engine(
        settings=store_backend.settings(retrieval={"floor_relative": 0.0, "floor_absolute": -1.0})
    )
    assert BASEMENT in contents(loose.search(QUERY))


def test_graph_leg_brings_an_associated_memory(store_backend: Backend) -> None:
    settings = store_backend.settings(
        retrieval={
            "candidates": 2,
            "graph_weight": 2.0,
            "floor_relative": 0.0,
            "floor_absolute": -1.0,
        }
    )
    engine = store_backend.engine(settings=settings)
    dark = engine.add(DARK).memory
    for text in (
        "Dark mode editor themes are popular",
        "Every editor has a dark theme now",
        "Mode switching in the editor is slow",
    ):
        engine.add(text)
    allergy = engine.add("Alice is allergic to peanuts").memory  # no word, no vector in common
    before = engine.search(QUERY, limit=2)
    assert allergy.id not in {h.memory.id for h in before}
    with engine.store.transaction():
        engine.store.add_association("default", dark.id, allergy.id, Relation.RELATED_TO, 1.0)
    hits = engine.search(QUERY, limit=2)
    by_id = {h.memory.id: h for h in hits}
    assert dark.id in by_id and allergy.id in by_id
    assert dict(by_id[allergy.id].ranks) == {"graph": 1}
    # the graph leg is part of hybrid search only
    assert allergy.id not in {h.memory.id for h in engine.search(QUERY, mode="vector", limit=2)}


# --- access ------------------------------------------------------------------------------------


def test_search_records_access(store_backend: Backend) -> None:
    engine = store_backend.engine()
    dark = engine.add(DARK).memory
    tea = engine.add(TEA).memory
    assert dark.access_count == 0 and dark.last_accessed_at is None
    engine.search(QUERY)
    engine.search(QUERY, mode="fts")
    engine.close()
    again = store_backend.engine()
    seen = again.get(dark.id)
    assert seen.access_count == 2 and seen.last_accessed_at is not None
    assert seen.last_accessed_at >= dark.created_at
    assert again.get(tea.id).access_count == 0  # not returned, not counted


def test_access_is_visible_to_a_writer_without_close(engine: MemoryEngine) -> None:
    dark = engine.add(DARK).memory
    engine.search(QUERY)
    engine.add(TEA)  # any write transaction flushes the buffered access counts
    assert engine.get(dark.id).access_count == 1


# --- with the real model -----------------------------------------------------------------------


@pytest.mark.model
def test_semantic_search_with_the_model(model_engine: MemoryEngine) -> None:
    for text in (
        DARK,
        TEA,
        "Carol is training for the Berlin marathon in September",
        "The team decided to migrate the billing service to PostgreSQL",
    ):
        model_engine.add(text)
    assert contents(model_engine.search("Which colour theme does Alice like?"))[0] == DARK
    assert contents(model_engine.search("what database for billing?"))[0].endswith("PostgreSQL")
    hits = model_engine.search("running a race", mode="vector")
    assert contents(hits)[0].startswith("Carol")
    # the floor keeps clearly unrelated memories out of a specific query
    assert TEA not in contents(model_engine.search("Carol's marathon training plan"))


def test_fts_statistics_are_per_owner(make_engine: MakeEngine) -> None:
    """BM25's IDF counts only the asking owner's memories: a word that floods another owner's
    memories does not lose its weight here."""
    engine = make_engine()
    for i in range(30):
        engine.add(f"kestrel survey log entry {i} for the noisy owner", owner="noisy")
    rare = engine.add("saw a kestrel hovering over the dunes", owner="quiet").memory.id
    keeper = engine.add("the lighthouse keeper repainted the railing", owner="quiet").memory.id
    common = engine.add("lighthouse lighthouse tour booked for the railing repair", owner="quiet")
    common_id = common.memory.id
    hits = engine.search("kestrel lighthouse", owner="quiet", mode="fts", limit=10)
    # In "quiet", kestrel (1 of 3) is rarer than lighthouse (2 of 3): the kestrel memory wins,
    # although "kestrel" is in 31 of 33 memories of the whole file.
    assert hits[0].memory.id == rare
    assert {h.memory.id for h in hits} == {rare, common_id, keeper}
    assert len(engine.search("kestrel", owner="noisy", mode="fts", limit=50)) == 30


def test_a_type_filter_finds_its_memories_behind_many_of_other_types(
    make_engine: MakeEngine,
) -> None:
    """``types`` filters inside the legs, not after them: a preference ranked behind fifty
    closer facts is still the answer to a search for preferences."""
    engine = make_engine()
    engine.add_many(
        [
            MemoryInput(f"the orion rocket test number {i} fired on the orion pad", type="fact")
            for i in range(50)
        ]
    )
    liked = engine.add("Sam likes the orion rocket posters", type="preference").memory.id
    for mode in ("hybrid", "vector", "fts"):
        hits = engine.search("orion rocket test fired", types=["preference"], mode=mode)
        assert [h.memory.id for h in hits] == [liked], mode


# --- recipes and fusion levers (issue 26) ------------------------------------------------------


def test_a_recipe_runs_like_its_mode(filled: MemoryEngine) -> None:
    from memlane.retrieval import RECIPES, Recipe

    for mode in ("hybrid", "vector", "fts"):
        by_mode = filled.retriever.search(QUERY, mode=mode, record_access=False)
        by_recipe = filled.retriever.search(QUERY, mode=RECIPES[mode], record_access=False)
        assert [(h.memory.id, h.ranks) for h in by_recipe] == [
            (h.memory.id, h.ranks) for h in by_mode
        ]
    only_fts = Recipe("bm25 only, no floor", ("fts",), expand=False, floor=False)
    assert contents(filled.retriever.search(QUERY, mode=only_fts)) == [DARK, BASEMENT]


def test_fts_candidates_and_floor_are_levers(make_engine: MakeEngine) -> None:
    from memlane.retrieval import LEVERS

    def build(**retrieval: float) -> MemoryEngine:
        # the relevance floor off, so only the full-text levers decide who is left out
        engine = make_engine(retrieval={"floor_relative": 0.0, "floor_absolute": -1.0, **retrieval})
        for text in (DARK, BASEMENT, TEA):
            engine.add(text)
        return engine

    def ranks(engine: MemoryEngine) -> dict[str, dict[str, int]]:
        return {h.memory.content: dict(h.ranks) for h in engine.search(QUERY)}

    # "dark" matches BASEMENT by word, though its cosine to the query is far below DARK's
    assert ranks(build())[BASEMENT]["fts"] == 2
    strict = build(fts_floor_relative=0.9)
    assert "fts" not in ranks(strict)[BASEMENT]  # still found by the vector leg
    assert ranks(strict)[DARK] == {"vector": 1, "fts": 1}
    assert "fts" not in ranks(build(fts_candidates=1))[BASEMENT]
    plain = build()
    lever = plain.retriever.search(QUERY, mode=LEVERS["fts-cos-0.9"], record_access=False)
    assert all("fts" not in h.ranks for h in lever if h.memory.content == BASEMENT)


def test_a_long_memory_weighs_less_in_the_fusion(make_engine: MakeEngine) -> None:
    """A memory of more than ``long_words`` words (a long assistant answer that contains the
    question's words many times) weighs ``long_weight`` in the fused score: the short statement
    the question is about comes first; a leg alone (the baselines) is not weighed."""
    from memlane.retrieval import LEVERS

    answer = "assistant: " + " ".join(["dark mode editor preference"] * 80)  # 321 words

    def build(**retrieval: float) -> MemoryEngine:
        engine = make_engine(retrieval={"floor_relative": 0.0, "floor_absolute": -1.0, **retrieval})
        for text in (answer, DARK, BASEMENT, TEA):
            engine.add(text)
        return engine

    off = build(long_weight=1.0)
    assert contents(off.search(QUERY))[:2] == [answer, DARK]  # first in both legs: it wins
    engine = build()  # the defaults: long_words 300, long_weight 0.5
    hits = engine.search(QUERY)
    assert contents(hits)[0] == DARK and answer in contents(hits)  # demoted, not dropped
    by_text = {h.memory.content: h for h in hits}
    assert by_text[answer].ranks == {"vector": 1, "fts": 1}  # ranked as before, weighed half
    assert by_text[answer].score < by_text[DARK].score
    assert contents(engine.search(QUERY, mode="vector"))[0] == answer  # the leg alone: as it is
    assert contents(engine.search(QUERY, mode="fts"))[0] == answer
    assert contents(build(long_words=400).search(QUERY))[0] == answer  # 321 words: not long
    lever = engine.retriever.search(QUERY, mode=LEVERS["long-off"], record_access=False)
    assert contents(lever)[0] == answer


def test_a_long_memory_takes_no_place_in_a_ranked_leg(make_engine: MakeEngine) -> None:
    """Long assistant answers that hold the question's words rank first in both legs; with one
    place a leg (``candidates`` 1) they took the place of the short statement the question is
    about, which then was no candidate at all. A long memory takes no place: each leg keeps its
    hits until one short one is in, so the statement is a candidate again and, weighed as a
    short memory, ranks first (BEAM: docs/replay.md, "Injection precision")."""
    from memlane.retrieval import LEVERS, Recipe
    from memlane.types import SearchHit

    answers = [  # three long answers, each other words around the query's (so none is a dup)
        f"assistant: option {i}: " + " ".join(f"dark mode editor preference {w}" for w in words)
        for i, words in enumerate(
            (["alpha", "bravo", "charlie"] * 25, ["delta", "echo", "foxtrot"] * 25,
             ["golf", "hotel", "india"] * 25)
        )
    ]  # fmt: skip

    def build(**retrieval: float) -> MemoryEngine:
        engine = make_engine(
            retrieval={"floor_relative": 0.0, "floor_absolute": -1.0, "neighbour_seeds": 0,
                       **retrieval}
        )  # fmt: skip
        for text in (*answers, DARK, TEA):
            engine.add(text)
        assert len(engine.list()) == 5
        return engine

    def search(
        engine: MemoryEngine, mode: str | Recipe = "hybrid", owner: str = "default"
    ) -> list[SearchHit]:
        return engine.retriever.search(QUERY, owner=owner, depth=1, mode=mode, record_access=False)

    before = build(long_lookahead=1)  # long memories take places, as before
    assert DARK not in contents(search(before))
    engine = build()
    hits = search(engine)
    assert contents(hits)[0] == DARK
    assert {h.memory.content for h in hits} <= {DARK, *answers}
    assert DARK not in contents(search(engine, LEVERS["long-places"]))
    # short memories only: a leg's places are its first hits, however far it looks ahead
    for text in (DARK, BASEMENT, TEA):
        engine.add(text, owner="bob")
    assert [h.ranks for h in search(engine, owner="bob")] == [{"vector": 1, "fts": 1}]


def test_the_message_a_long_hit_answers_is_marked_answered(make_engine: MakeEngine) -> None:
    """In a chat stored message by message, the short message right before a long hit in its
    session (the message the long answer answers) is marked ``answered`` when it is a hit too,
    for the injection's cut; not one in another session, not a long one, and nothing at all in
    a store without long memories."""
    from memlane.retrieval import LegScores

    answer = "assistant: " + " ".join(f"dark mode editor preference {w}" for w in ["a", "b"] * 40)
    engine = make_engine(retrieval={"floor_relative": 0.0, "floor_absolute": -1.0})
    asked = engine.add("user: which editor theme should I use at night?", session="s1").memory.id
    long_id = engine.add(answer, session="s1").memory.id
    engine.add(BASEMENT, session="s2")
    other = engine.add(TEA, session="s2").memory.id  # right before nothing long
    ev = LegScores()
    hits = engine.retriever.search(QUERY, evidence=ev, record_access=False)
    assert {asked, long_id, other} <= {h.memory.id for h in hits}
    assert ev.long == {long_id}
    assert ev.answered == {asked}
    # short memories only: nothing is long, nothing is answered
    for text in (DARK, BASEMENT, TEA):
        engine.add(text, owner="bob", session="s1")
    ev = LegScores()
    engine.retriever.search(QUERY, owner="bob", evidence=ev, record_access=False)
    assert ev.long == frozenset() and ev.answered == frozenset()
