"""The one turn model every door shares (memlane.injection.turn, docs/integrations.md "One turn,
many doors"): a turn decided once, its repeats, the earlier blocks of a door whose text is not
kept, a shrunk history, purge and forget, and the records holding digests, not prompts. Both
backends."""

from __future__ import annotations

from typing import Any

import pytest

from memlane import InvalidArgument, MemoryEngine, Turn
from memlane.injection.turn import turn_key

FACTS = [
    "Alice is allergic to peanuts and carries an epipen",
    "The team picked PostgreSQL for the billing service because of JSONB support",
    "Bob drinks green tea every afternoon",
    "Carol runs a marathon in Berlin every September",
    "The deploy pipeline uses GitHub Actions with a self-hosted runner",
]
QUESTIONS = [
    "Can Alice eat the peanuts satay at the dinner party?",
    "Which database did the team pick for the billing service?",
    "What does Bob drink every afternoon?",
    "Where does Carol run her marathon?",
    "How does the deploy pipeline run?",
    "Tell me about Alice and peanuts again",
]


@pytest.fixture
def filled(engine: MemoryEngine) -> MemoryEngine:
    for fact in FACTS:
        engine.add(fact)
    return engine


def shown(turn: Turn) -> list[str]:
    """The memory lines of every block the door would send: earlier ones, then this turn's."""
    lines: list[str] = []
    for text in [b.block for b in turn.earlier] + [turn.block or ""]:
        lines += [line for line in text.split("\n") if line.startswith("[fact]")]
    return lines


def event_count(engine: MemoryEngine, session: str) -> int:
    return len(engine.store.injection_events(engine.owner_of(None), session, limit=1000))


def test_a_repeat_call_returns_the_same_block_and_records_nothing(
    filled: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = filled.turn("s", QUESTIONS[0], kept=True)
    assert not first.repeat and first.injection is not None
    assert first.block is not None and "peanuts" in first.block
    assert first.block == first.injection.block  # the re-rendered block is the decided one
    state, events = filled.session("s"), event_count(filled, "s")

    def no_search(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a repeat must not search")

    monkeypatch.setattr(filled.retriever, "search", no_search)
    for _ in range(3):  # a tool loop: three more model calls of the same turn
        again = filled.turn("s", QUESTIONS[0], kept=True)
        assert again.repeat and again.injection is None
        assert again.block == first.block and again.key == first.key
        assert [i.memory.id for i in again.items] == [i.memory.id for i in first.items]
    assert filled.session("s") == state  # no turn counted, nothing recorded
    assert event_count(filled, "s") == events


def test_without_position_the_same_words_later_are_a_new_turn(filled: MemoryEngine) -> None:
    filled.turn("s", QUESTIONS[0], kept=True)
    filled.turn("s", QUESTIONS[1], kept=True)
    later = filled.turn("s", QUESTIONS[0], kept=True)  # not the latest turn: asked again
    assert not later.repeat and later.injection is not None
    assert later.injection.turn == 3


def test_kept_false_gives_earlier_blocks_with_stable_bytes_and_no_memory_twice(
    filled: MemoryEngine,
) -> None:
    decided: dict[int, Turn] = {}
    for position, question in enumerate(QUESTIONS, start=1):
        turn = filled.turn("s", question, kept=False, position=position)
        decided[position] = turn
        assert not turn.repeat and turn.reset is None
        # every earlier turn that had a block comes back, oldest first, with its exact bytes
        want = [(p, t.block) for p, t in decided.items() if p < position and t.block]
        assert [(b.position, b.block) for b in turn.earlier] == want
        lines = shown(turn)
        assert len(lines) == len(set(lines)), f"a memory twice in one request: {lines}"
        # a tool-result continuation of the turn: the same answer, earlier blocks included
        again = filled.turn("s", question, kept=False, position=position)
        assert again.repeat and again.block == turn.block and again.earlier == turn.earlier
    # every fact was shown exactly once over the six turns (the last question repeats the
    # first's subject: the memory is in an earlier block, not injected again)
    assert sorted(shown(decided[6])) == sorted(f"[fact] {f}" for f in FACTS)


def test_kept_true_gives_no_earlier_blocks(filled: MemoryEngine) -> None:
    filled.turn("s", QUESTIONS[0], kept=True, position=1)
    second = filled.turn("s", QUESTIONS[2], kept=True, position=2)
    assert second.earlier == ()


def test_earlier_blocks_leave_the_window(filled: MemoryEngine, make_engine: Any) -> None:
    engine = make_engine(injection={"context_window_depth": 2})
    for fact in FACTS:
        engine.add(fact)
    first = engine.turn("s", QUESTIONS[0], kept=False, position=1)
    assert first.block is not None
    second = engine.turn("s", QUESTIONS[2], kept=False, position=2)
    assert [b.block for b in second.earlier] == [first.block]
    third = engine.turn("s", QUESTIONS[3], kept=False, position=3)
    assert first.block not in [b.block for b in third.earlier]  # two turns later: out


def test_a_shrunk_history_resets_the_session(filled: MemoryEngine) -> None:
    first = filled.turn("s", QUESTIONS[0], kept=False, position=1)
    filled.turn("s", QUESTIONS[2], kept=False, position=2)
    filled.turn("s", QUESTIONS[3], kept=False, position=3)
    # the client compacted its history: two user turns where three were
    after = filled.turn("s", QUESTIONS[0] + " Really?", kept=False, position=2)
    assert after.reset == "compact" and after.earlier == ()
    assert filled.session("s").last_reset_reason == "compact"
    # what the first turn showed is no longer in the history: injected again
    assert first.block is not None and after.block is not None
    assert "peanuts" in after.block
    # and the old turns' records are gone: their keys decide anew
    again = filled.turn("s", QUESTIONS[3], kept=False, position=3)
    assert not again.repeat


def test_reset_session_drops_the_turn_records(filled: MemoryEngine) -> None:
    first = filled.turn("s", QUESTIONS[0], kept=False, position=1)
    filled.reset_session("s", "clear")
    again = filled.turn("s", QUESTIONS[0], kept=False, position=1)
    assert not again.repeat and again.block == first.block
    owner = filled.owner_of(None)
    assert [r.key for r in filled.store.session_turns(owner, "s")] == [again.key]


def test_a_forgotten_or_purged_memory_leaves_the_rerendered_blocks(filled: MemoryEngine) -> None:
    first = filled.turn("s", QUESTIONS[0], kept=False, position=1)
    second = filled.turn("s", QUESTIONS[2], kept=False, position=2)
    assert first.block is not None and "epipen" in first.block
    peanuts = next(i.memory.id for i in first.items if "peanuts" in i.memory.content)
    filled.forget(peanuts)
    again = filled.turn("s", QUESTIONS[2], kept=False, position=2)
    assert again.repeat and again.block == second.block
    assert all("epipen" not in b.block for b in again.earlier)
    postgres = next(i.memory.id for i in first.items if "PostgreSQL" in i.memory.content)
    filled.purge(postgres)
    third = filled.turn("s", QUESTIONS[2], kept=False, position=2)
    assert all("PostgreSQL" not in b.block for b in third.earlier)
    assert "PostgreSQL" not in (filled.turn("s", QUESTIONS[0], kept=False, position=1).block or "")


def test_the_records_hold_digests_never_the_prompt(filled: MemoryEngine) -> None:
    secret = "My door code is 4471 and Alice is allergic to peanuts"
    turn = filled.turn("s", secret, kept=False, position=1)
    owner = filled.owner_of(None)
    assert turn.key == turn_key(owner, "s", 1, secret)
    with filled.store.db.read() as q:  # type: ignore[attr-defined]
        rows = q.all("SELECT * FROM session_turns")
    assert rows and all("4471" not in str(r) and "door code" not in str(r) for r in rows)
    assert turn.key in str(rows)


def test_a_door_key_names_the_turn(filled: MemoryEngine) -> None:
    first = filled.turn("s", QUESTIONS[0], kept=True, key="run-1")
    # the same run with the message rewritten by the framework: still the same turn
    same = filled.turn("s", QUESTIONS[0] + " (step 2)", kept=True, key="run-1")
    assert same.repeat and same.block == first.block
    assert not filled.turn("s", QUESTIONS[0], kept=True, key="run-2").repeat


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("position", 0, "position"),
        ("position", True, "position"),
        ("kept", "yes", "kept"),
        ("message", "  ", "message"),
        ("key", "", "key"),
        ("session", "", "session"),
    ],
)
def test_bad_arguments_are_named_and_record_nothing(
    filled: MemoryEngine, field: str, value: Any, named: str
) -> None:
    args: dict[str, Any] = {"session": "s", "message": QUESTIONS[0], "kept": True}
    args[field] = value
    with pytest.raises(InvalidArgument, match=named):
        filled.turn(args.pop("session"), args.pop("message"), **args)
    assert filled.session("s").turn == 0


def test_kept_true_never_shows_a_memory_again_while_the_client_holds_it(
    make_engine: Any,
) -> None:
    """A kept door's client holds every block until a reset: past the no-repeat window
    (depth 2 here) the memory is not injected again (Copilot CLI and OpenCode got a second
    copy at the 11th prompt with the default 10); after a compaction it comes back once. A
    kept=False door still gets it again once the window has passed."""
    engine = make_engine(injection={"context_window_depth": 2})
    for fact in FACTS:
        engine.add(fact)
    first = engine.turn("k", QUESTIONS[0], kept=True)
    assert first.block is not None and "peanuts" in first.block
    for n, question in enumerate([QUESTIONS[2], QUESTIONS[3], QUESTIONS[4]] * 2):
        later = engine.turn("k", f"{question} ({n})", kept=True)
        assert "peanuts" not in (later.block or ""), n
    assert "peanuts" not in (engine.turn("k", QUESTIONS[5], kept=True).block or "")
    engine.reset_session("k", "compact", owner=None)
    back = engine.turn("k", QUESTIONS[5], kept=True)
    assert back.block is not None and "peanuts" in back.block
    # the same session through a door that keeps nothing: the window's end lets it back in
    engine.turn("f", QUESTIONS[0], kept=False)
    engine.turn("f", QUESTIONS[2], kept=False)
    engine.turn("f", QUESTIONS[3], kept=False)
    again = engine.turn("f", QUESTIONS[5], kept=False)
    assert "peanuts" in (again.block or "")
