"""Injection before each model turn (ARCHITECTURE.md, "Injection"): each of the eight steps as a
scenario, session resets, and per-agent settings."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memlane.injection.pipeline as pipeline
from conftest import Backend
from memlane import (
    INJECTION_BLOCK_PREFIX,
    InvalidArgument,
    MemoryEngine,
    MemoryInput,
    ResetReason,
)
from memlane.embeddings.hashing import HashEmbedder

MakeEngine = Callable[..., MemoryEngine]

PEANUTS = "Alice is allergic to peanuts and carries an epipen"
POSTGRES = "The team picked PostgreSQL for the billing service because of JSONB support"
TEA = "Bob drinks green tea every afternoon"
QUESTION = "Can Alice eat the peanuts satay at the dinner party?"


def ids(injection: Any) -> list[str]:
    return [item.memory.id for item in injection.items]


# --- step 1: trivial prompts -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["ok", "thanks!", "Thanks, Mel!", "ok cool", "/compact", "/clear all", "👍"]
)
def test_trivial_prompts_skip_the_search(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    engine.add(PEANUTS)

    def no_search(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a trivial prompt must not search")

    monkeypatch.setattr(engine.retriever, "search", no_search)
    inj = engine.inject("s", text)
    assert inj.block is None and inj.items == ()
    assert inj.skipped == {"trivial": 1}
    assert inj.turn == 1  # still a turn of the conversation


def test_a_real_question_is_not_trivial(engine: MemoryEngine) -> None:
    mid = engine.add(PEANUTS).memory.id
    inj = engine.inject("s", QUESTION)
    assert ids(inj) == [mid]
    assert "trivial" not in inj.skipped


SPEAKER_ACKNOWLEDGEMENTS = [
    "Caroline: thanks!",
    "Mel: Bye! Take care.",
    "John: lol ok",
    "Jon: Thanks!",
    "Gina: ;)",
    "James: Thanks, John! Take care, bye!",
    "Nate: No problem! Catch you later!",
    "Dr. Smith: thanks a lot!",
    "thanks!!",
    "ok 👍",
    "Thanks, bye!",
    "Bye! Take care.",
    "Sounds good, go ahead 🙏",
]
CONTENT_PROMPTS = [
    "thanks, what was the name of that restaurant?",
    "Caroline: I adopted a dog named Max",
    "Caroline: thanks! where did Alice say she ate peanuts?",
    "Mel: Bye! Take the peanuts to Alice.",
    "Note: buy milk",
    "Note: eggs",
    "ok, remind me about Alice's allergy",
    "no peanuts",
    "take care of the dog",
    "Ok. Peanuts.",
]


@pytest.mark.parametrize("text", SPEAKER_ACKNOWLEDGEMENTS)
def test_acknowledgements_with_a_speaker_or_punctuation_skip_the_search(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    engine.add(PEANUTS)

    def no_search(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a trivial prompt must not search: {text!r}")

    monkeypatch.setattr(engine.retriever, "search", no_search)
    inj = engine.inject("s", text)
    assert inj.block is None and inj.items == ()
    assert inj.skipped == {"trivial": 1}
    events = engine.store.injection_events("default", "s")
    assert [e["skipped"] for e in events] == [{"trivial": 1}]


@pytest.mark.parametrize("text", CONTENT_PROMPTS)
def test_prompts_with_content_are_searched(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    mid = engine.add(PEANUTS).memory.id
    queries: list[str] = []
    real_search = engine.retriever.search

    def spy(query: str, **kwargs: Any) -> Any:
        queries.append(query)
        return real_search(query, **kwargs)

    monkeypatch.setattr(engine.retriever, "search", spy)
    inj = engine.inject("s", text)
    assert "trivial" not in inj.skipped
    assert len(queries) == 1 and queries[0].startswith(text)
    if "peanuts" in text.lower():
        assert mid in ids(inj)


# --- step 2: recent exchanges enrich the query -------------------------------------------------


def test_recent_enriches_a_follow_up(engine: MemoryEngine) -> None:
    mid = engine.add(POSTGRES).memory.id
    engine.add(TEA)
    alone = engine.inject("s1", "why that?")
    assert alone.items == ()
    recent = ["Which database are we using for billing?", "We use PostgreSQL for billing."]
    inj = engine.inject("s2", "why that?", recent=recent)
    assert ids(inj) == [mid]


@pytest.mark.parametrize("cache_size", [2048, 0])
def test_a_turn_embeds_its_query_once(store_backend: Backend, cache_size: int) -> None:
    """The query is embedded ahead, while the turn's first store trip runs, and the search
    uses that vector: one model call for the query, none twice; without a query cache
    (``cache_size = 0``) the search embeds it itself, once."""
    embedder = HashEmbedder()
    engine = store_backend.engine(embedder, embedding={"cache_size": cache_size})
    mid = engine.add(PEANUTS).memory.id
    engine.add(TEA)
    asked: list[str] = []
    embed = embedder.embed_batch

    def counting(texts: Any) -> Any:
        asked.extend(texts)
        return embed(texts)

    embedder.embed_batch = counting  # type: ignore[method-assign]
    assert ids(engine.inject("s1", QUESTION)) == [mid]
    assert asked == [QUESTION]


def test_only_a_follow_up_is_enriched(engine: MemoryEngine) -> None:
    cfg = engine.settings.injection
    recent = ["Which database are we using for billing?", "We use PostgreSQL for billing."]
    follow_up = pipeline.build_query("why that?", recent, cfg)
    assert follow_up.splitlines() == ["why that?", recent[1], recent[0]]  # newest first
    sentence = "Remind me which database the billing service stores invoices in"
    assert pipeline.build_query(sentence, recent, cfg) == sentence
    always = cfg.model_copy(update={"enrich_below_words": 1000, "recent_chars": 10})
    assert pipeline.build_query(sentence, recent, always).splitlines()[1] == recent[1][:10]


def test_injected_blocks_in_recent_do_not_enter_the_query(engine: MemoryEngine) -> None:
    engine.add(TEA)
    first = engine.inject("s1", "what does the team drink in the afternoon?")
    assert first.block is not None
    query = pipeline.build_query("why that?", [first.block, "ok"], engine.settings.injection)
    assert query.splitlines() == ["why that?", "ok"]


def test_recent_must_be_a_list_of_strings(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidArgument, match="recent"):
        engine.inject("s", QUESTION, recent="previous message")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="recent"):
        engine.inject("s", QUESTION, recent=["ok", 3])  # type: ignore[list-item]


# --- step 3: pinned types ----------------------------------------------------------------------


def pinned_engine(make_engine: MakeEngine, **injection: Any) -> MemoryEngine:
    cfg = {"ambient_enabled": True, "pinned_types": ["identity"], **injection}
    return make_engine(injection=cfg)


def test_pinned_types_come_first(make_engine: MakeEngine) -> None:
    engine = pinned_engine(make_engine)
    name = engine.add("The user's name is Dana Whitfield", type="identity").memory
    peanuts = engine.add(PEANUTS).memory
    inj = engine.inject("s", QUESTION)
    assert [(i.memory.id, i.source) for i in inj.items] == [
        (name.id, "pinned"),
        (peanuts.id, "contextual"),
    ]
    assert inj.block == "\n".join(
        [
            INJECTION_BLOCK_PREFIX,
            "[Pinned context]",
            "[identity] The user's name is Dana Whitfield",
            "[Relevant to this message]",
            f"[fact] {PEANUTS}",
        ]
    )


def test_pinned_off_by_default(engine: MemoryEngine) -> None:
    engine.add("The user's name is Dana Whitfield", type="identity")
    peanuts = engine.add(PEANUTS).memory
    inj = engine.inject("s", QUESTION)
    assert ids(inj)[0] == peanuts.id
    assert all(i.source == "contextual" for i in inj.items)
    assert "[Pinned context]" not in (inj.block or "")


def test_pinned_limit_and_sort(make_engine: MakeEngine) -> None:
    engine = pinned_engine(
        make_engine, pinned_types=["goal", "identity"], pinned_limit=2, pinned_sort="importance"
    )
    engine.add("Goal: ship the mobile app by June", type="goal")  # 0.9
    engine.add("Goal: learn to play the cello", type="goal", importance=0.2)
    engine.add("The user's name is Dana Whitfield", type="identity")  # 1.0
    engine.add("Goal: run a marathon in under four hours", type="goal", importance=0.95)
    inj = engine.inject("s", "What should I work on this afternoon?")
    pinned = [i.memory.content for i in inj.items if i.source == "pinned"]
    assert pinned == [
        "The user's name is Dana Whitfield",
        "Goal: run a marathon in under four hours",
    ]


# --- step 4: memories learned in this session --------------------------------------------------


def test_memories_learned_in_the_session_are_not_fed_back(engine: MemoryEngine) -> None:
    mid = engine.add(PEANUTS, session="chat-1").memory.id
    inj = engine.inject("chat-1", QUESTION)
    assert inj.items == ()
    assert inj.skipped.get("same_session") == 1
    # another session may be shown it
    assert ids(engine.inject("chat-2", QUESTION)) == [mid]


def test_after_a_reset_earlier_memories_of_the_session_may_return(engine: MemoryEngine) -> None:
    before = engine.add(PEANUTS, session="chat-1").memory.id
    assert engine.inject("chat-1", QUESTION).items == ()
    state = engine.reset_session("chat-1", "compact")
    assert state.last_reset_reason == "compact" and state.last_reset_at is not None
    after = engine.add("Alice also reacts badly to peanuts oil in any dinner", session="chat-1")
    inj = engine.inject("chat-1", QUESTION)
    assert before in ids(inj)  # learned before the reset: the model no longer has it
    assert after.memory.id not in ids(inj)  # learned since: still in the model's context
    assert inj.skipped.get("same_session") == 1


# --- step 5: dedup against what the session has seen -------------------------------------------


def test_id_not_repeated_within_the_window(make_engine: MakeEngine) -> None:
    engine = make_engine(injection={"context_window_depth": 3})
    mid = engine.add(PEANUTS).memory.id
    shown = []
    for turn in range(1, 9):
        inj = engine.inject("s", QUESTION)
        assert inj.turn == turn
        shown.append(ids(inj) == [mid])
        if ids(inj) != [mid]:
            assert inj.skipped == {"already_injected": 1}
    # turn 1, then again once 3 turns have passed (4, 7)
    assert shown == [True, False, False, True, False, False, True, False]


def test_trivial_turns_count_toward_the_window(make_engine: MakeEngine) -> None:
    engine = make_engine(injection={"context_window_depth": 3})
    mid = engine.add(PEANUTS).memory.id
    assert ids(engine.inject("s", QUESTION)) == [mid]
    engine.inject("s", "ok")
    engine.inject("s", "thanks")
    assert ids(engine.inject("s", QUESTION)) == [mid]


def test_reset_allows_the_same_id_again(engine: MemoryEngine) -> None:
    mid = engine.add(PEANUTS).memory.id
    assert ids(engine.inject("s", QUESTION)) == [mid]
    assert engine.inject("s", QUESTION).items == ()
    for reason in ("compact", "clear", ResetReason.RESUME):
        state = engine.reset_session("s", reason)
        assert state.injected == {} and state.last_reset_reason == ResetReason(reason).value
        assert ids(engine.inject("s", QUESTION)) == [mid]


def test_semantic_duplicates_are_not_injected_twice(engine: MemoryEngine) -> None:
    a = engine.add("Alice prefers dark mode in every editor").memory
    b = engine.add("Alice prefers the dark mode in every editor")  # gray_keep: its own memory
    assert b.decision == "gray_keep"
    inj = engine.inject("s", "Which editor theme does Alice like, dark mode?")
    assert len(inj.items) == 1  # near-identical: one of them is enough
    assert inj.skipped.get("semantic_duplicate") == 1
    # next turn: the other one is still a duplicate of what the session was shown
    (shown,) = ids(inj)
    (other,) = {a.id, b.memory.id} - {shown}
    engine.forget(shown)
    inj = engine.inject("s", "Which editor theme does Alice like, dark mode?")
    assert inj.items == () and inj.skipped.get("semantic_duplicate") == 1
    assert other in {h.memory.id for h in engine.search("Alice dark mode editor")}  # it is found
    # another session was never shown the first: it gets the other one
    assert ids(engine.inject("s2", "Which editor theme does Alice like, dark mode?")) == [other]


def test_semantic_buffer_is_pruned_by_turn(make_engine: MakeEngine) -> None:
    engine = make_engine(injection={"context_window_depth": 2})
    engine.add("Alice prefers dark mode in every editor")
    engine.add("Alice prefers the dark mode in every editor")
    question = "Which editor theme does Alice like, dark mode?"
    (shown,) = ids(engine.inject("s", question))  # turn 1
    engine.forget(shown)
    assert engine.inject("s", question).skipped == {"semantic_duplicate": 1}  # turn 2
    assert len(engine.inject("s", question).items) == 1  # turn 3: turn 1 left the window


def test_semantic_threshold_is_a_setting(make_engine: MakeEngine) -> None:
    engine = make_engine(injection={"semantic_threshold": 1.0})
    engine.add("Alice prefers dark mode in every editor")
    engine.add("Alice prefers the dark mode in every editor")
    inj = engine.inject("s", "Which editor theme does Alice like, dark mode?")
    assert len(inj.items) == 2


def test_exact_text_in_two_scopes_is_injected_once(engine: MemoryEngine) -> None:
    # The same text stored for two agents of one owner: same content hash, two ids.
    engine.add(PEANUTS, agent="a")
    engine.add(PEANUTS, agent="b")
    inj = engine.inject("s", QUESTION)
    assert len(inj.items) == 1
    assert inj.skipped.get("duplicate_in_batch", 0) + inj.skipped.get("semantic_duplicate", 0) == 1


# --- step 6: budget, and only what is injected is recorded -------------------------------------


def budget_engine(make_engine: MakeEngine, max_total: int) -> tuple[MemoryEngine, list[str]]:
    engine = pinned_engine(make_engine, pinned_limit=2, max_total=max_total)
    engine.add("The user's name is Dana Whitfield", type="identity")
    engine.add("Dana works as a nurse at the city hospital", type="identity")
    engine.add_many(
        [
            MemoryInput("Dana's garden has tomatoes and basil"),
            MemoryInput("Dana waters the garden tomatoes every morning"),
            MemoryInput("Dana's garden basil grows near the fence"),
        ]
    )
    return engine, [m.id for m in engine.list()]


def test_max_total_keeps_pinned_first(make_engine: MakeEngine) -> None:
    engine, _ = budget_engine(make_engine, max_total=2)
    inj = engine.inject("s", "How is the garden with tomatoes and basil doing?")
    assert [i.source for i in inj.items] == ["pinned", "pinned"]
    assert inj.skipped.get("budget") == 3
    engine3, _ = budget_engine(make_engine, max_total=3)  # same store, new settings
    inj = engine3.inject("s2", "How is the garden with tomatoes and basil doing?")
    assert [i.source for i in inj.items] == ["pinned", "pinned", "contextual"]


def test_only_injected_items_are_recorded(make_engine: MakeEngine) -> None:
    engine, _ = budget_engine(make_engine, max_total=3)
    question = "How is the garden with tomatoes and basil doing?"
    first = engine.inject("s", question)
    state = engine.session("s")
    assert set(state.injected) == set(ids(first))
    assert set(state.injected.values()) == {1}
    # what the budget left out was never shown: it is offered on the next turn
    second = engine.inject("s", question)
    assert second.items and not set(ids(second)) & set(ids(first))
    assert second.skipped.get("already_injected") == 3


def test_token_budget(make_engine: MakeEngine) -> None:
    # the cut off: the hash embedder's cosines would cut the second memory before the budget
    engine = make_engine(injection={"max_tokens": 20, "cut": False})  # ~80 characters
    engine.add("Dana's garden has tomatoes and basil")  # 36 chars + "[fact] "
    engine.add("Dana waters the garden tomatoes every morning before going to work")
    inj = engine.inject("s", "How is the garden with tomatoes and basil doing?")
    assert len(inj.items) == 1 and inj.skipped.get("budget") == 1


# --- step 7: the block -------------------------------------------------------------------------


def test_block_format_is_exact(engine: MemoryEngine) -> None:
    engine.add("Alice is allergic to\n  peanuts   and carries an epipen")
    engine.add("Alice ordered peanuts satay last time by mistake", type="event")
    inj = engine.inject("s", QUESTION)
    lines = (inj.block or "").split("\n")
    assert lines[0] == INJECTION_BLOCK_PREFIX == "[Context from memory]"
    assert lines[1] == "[Relevant to this message]"
    assert sorted(lines[2:]) == [
        "[event] Alice ordered peanuts satay last time by mistake",
        "[fact] Alice is allergic to peanuts and carries an epipen",  # whitespace collapsed
    ]
    assert lines[2:] == [
        f"[{i.memory.type.value}] {' '.join(i.memory.content.split())}" for i in inj.items
    ]
    assert all(i.source == "contextual" and i.score > 0 for i in inj.items)


def test_a_block_can_never_be_stored_as_a_memory(engine: MemoryEngine) -> None:
    engine.add(PEANUTS)
    block = engine.inject("s", QUESTION).block
    assert block is not None
    with pytest.raises(Exception, match="injected"):
        engine.add(block)


# --- step 8: trace and event rows --------------------------------------------------------------


def test_injection_event_rows_and_trace(
    engine: MemoryEngine, caplog: pytest.LogCaptureFixture
) -> None:
    mid = engine.add(PEANUTS).memory.id
    with caplog.at_level(logging.DEBUG, logger="memlane"):
        first = engine.inject("s", QUESTION)
        engine.inject("s", QUESTION)
        engine.inject("s", "ok")
    events = engine.store.injection_events("default", "s")
    assert [e["turn"] for e in events] == [3, 2, 1]  # newest first
    assert events[2]["memory_ids"] == [mid]
    assert events[1]["memory_ids"] == [] and events[1]["skipped"] == {"already_injected": 1}
    assert events[0]["skipped"] == {"trivial": 1}
    assert all(e["elapsed_ms"] >= 0 for e in events)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(mid in m and "contextual" in m for m in debug)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert sum("injected=1" in m for m in info) == 1 and len(info) >= 3
    assert first.elapsed_ms >= 0


def test_the_turn_is_logged_after_its_writes_commit(store_backend: Backend) -> None:
    """A log handler that blocks (``memlane serve`` with a stderr pipe nobody reads) must not
    hold the store's write lock: while the turn's INFO line is emitted, another engine on the
    same store can write at once."""
    engine = store_backend.engine()
    other = store_backend.engine(store={"busy_timeout_ms": 100})
    engine.add(PEANUTS)
    written: list[str] = []

    class WriteWhileLogging(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("inject session="):
                text = ("Carol plays the cello", "Dan repairs old bicycles")[len(written)]
                written.append(other.add(text).decision.value)

    handler = WriteWhileLogging(logging.INFO)
    logger = logging.getLogger("memlane.injection")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        engine.inject("s", QUESTION)
        engine.inject("s", "ok")  # the trivial path records a turn too
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert written == ["added", "added"]


# --- sessions: bad input, state ----------------------------------------------------------------


@pytest.mark.parametrize("reason", ["compaction", "", "COMPACT ", "restart"])
def test_unknown_reset_reason_is_invalid(engine: MemoryEngine, reason: str) -> None:
    mid = engine.add(PEANUTS).memory.id
    engine.inject("s", QUESTION)
    with pytest.raises(InvalidArgument, match="compact, clear, resume"):
        engine.reset_session("s", reason)
    state = engine.session("s")
    assert dict(state.injected) == {mid: 1} and state.last_reset_at is None


def test_session_state_lists_only_the_window(make_engine: MakeEngine) -> None:
    engine = make_engine(injection={"context_window_depth": 2})
    mid = engine.add(PEANUTS).memory.id
    assert engine.session("s").injected == {}
    engine.inject("s", QUESTION)  # turn 1: injected
    engine.inject("s", "ok")  # turn 2: still within 2 turns of turn 1
    assert dict(engine.session("s").injected) == {mid: 1}
    engine.inject("s", "thanks")  # turn 3: turn 1 left the window
    state = engine.session("s")
    assert state.turn == 3 and state.injected == {}
    assert ids(engine.inject("s", QUESTION)) == [mid]  # so it may be shown again


@pytest.mark.parametrize("session", ["", "   "])
def test_empty_session_is_invalid(engine: MemoryEngine, session: str) -> None:
    with pytest.raises(InvalidArgument, match="session"):
        engine.inject(session, QUESTION)
    with pytest.raises(InvalidArgument, match="session"):
        engine.reset_session(session, "clear")


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_invalid_and_records_nothing(engine: MemoryEngine, text: str) -> None:
    with pytest.raises(InvalidArgument, match="text is empty"):
        engine.inject("s", text)
    assert engine.session("s").turn == 0
    assert engine.store.injection_events("default", "s") == []


def test_text_must_be_a_string(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidArgument, match="text"):
        engine.inject("s", None)  # type: ignore[arg-type]


def test_fts_operators_in_the_prompt(engine: MemoryEngine) -> None:
    mid = engine.add(PEANUTS).memory.id
    for text in ['NEAR(peanuts "allergy', "peanuts AND OR NOT *", "col: peanuts^"]:
        engine.reset_session("s", "clear")
        assert ids(engine.inject("s", text + " for Alice?")) == [mid]


def test_sessions_are_scoped_by_owner(engine: MemoryEngine) -> None:
    a = engine.add(PEANUTS, owner="alice").memory.id
    b = engine.add(PEANUTS, owner="bob").memory.id
    assert ids(engine.inject("s", QUESTION, owner="alice")) == [a]
    assert ids(engine.inject("s", QUESTION, owner="bob")) == [b]
    assert engine.session("s", owner="alice").turn == 1


def test_disabled_injects_nothing(make_engine: MakeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = make_engine(injection={"enabled": False})
    engine.add(PEANUTS)

    def no_search(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("injection is disabled: no search")

    monkeypatch.setattr(engine.retriever, "search", no_search)
    inj = engine.inject("s", QUESTION)
    assert inj.block is None and inj.items == () and inj.skipped == {"disabled": 1}
    # the session is left as it was: no turn counted, no event row
    assert inj.turn == 0 and engine.session("s").turn == 0
    assert engine.store.injection_events("default", "s") == []


def test_session_state_survives_reopening(store_backend: Backend) -> None:
    engine = store_backend.engine()
    mid = engine.add(PEANUTS).memory.id
    engine.inject("s", QUESTION)
    engine.close()
    again = store_backend.engine()
    inj = again.inject("s", QUESTION)
    assert inj.turn == 2 and inj.items == () and inj.skipped == {"already_injected": 1}
    assert dict(again.session("s").injected) == {mid: 1}


# --- per-agent settings ------------------------------------------------------------------------


def test_agent_override_of_max_total(store_backend: Backend) -> None:
    Path(store_backend.home / "memlane.toml").write_text(
        "[injection]\nmax_total = 5\n[agents.terse.injection]\nmax_total = 1\n"
    )
    engine = store_backend.engine()
    engine.add_many(
        [
            MemoryInput("Dana's garden has tomatoes and basil"),
            MemoryInput("Dana waters the garden tomatoes every morning"),
            MemoryInput("Dana's garden basil grows near the fence"),
        ]
    )
    question = "How is the garden with tomatoes and basil doing?"
    assert len(engine.inject("s1", question, agent="terse").items) == 1
    assert len(engine.inject("s2", question, agent="chatty").items) == 3
    assert len(engine.inject("s3", question).items) == 3


@pytest.mark.model
def test_injection_with_the_model(model_engine: MemoryEngine) -> None:
    mid = model_engine.add(PEANUTS).memory.id
    model_engine.add(POSTGRES)
    model_engine.add("Carol is training for the Berlin marathon in September")
    inj = model_engine.inject(
        "s", "We're ordering Thai food tonight; what should I avoid for Alice?"
    )
    assert ids(inj)[0] == mid
    follow = model_engine.inject(
        "s2", "why is that?", recent=["Which database did we pick for billing?"]
    )
    assert follow.items and "PostgreSQL" in follow.items[0].memory.content
