"""Injection agrees with the write path (issue 26, item 4): the near-duplicate filter asks the
guard, so swapped roles, changed numbers and negations are never "the same"; of a changed value
the newer memory is shown with the earlier value and both dates, never the older alone.

The scenarios are the README's, with the real default model: its cosine puts each pair above
the injection's ``semantic_threshold`` (0.85), which is what hid one memory of each pair before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memlane import MemoryEngine
from memlane.injection.agree import NearPairs, Verdict, relate


def lines(injection: Any) -> list[str]:
    return [] if injection.block is None else injection.block.splitlines()


def shown_texts(injection: Any) -> list[str]:
    return [item.memory.content for item in injection.items]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Alice currently works at Acme", "Acme works at Alice", "distinct"),
        ("Quaid gave Melina a ring", "Melina gave Quaid a ring", "distinct"),
        ("Priya is 34 years old.", "Priya is 35 years old.", "update"),
        ("Tom eats meat on weekends.", "Tom does not eat meat on weekends.", "update"),
        ("Priya is 34 years old.", "Priya turned 35 last month.", "distinct"),
        ("Tom eats meat.", "Tom never eats meat on weekends.", "distinct"),
        ("Alice prefers dark mode in every editor", "Alice prefers the dark mode", "same"),
        ("Alice works at Acme", "Alice is employed by Acme", "same"),
        ("Bob founded a start-up", "bob founded a startup.", "same"),
        (
            "Alice prefers dark mode in every editor",
            "In every editor, Alice likes dark mode",
            "same",
        ),
        ("Bob drinks green tea every afternoon", "Every afternoon Bob has green tea", "same"),
        ("Bob visited Carol before Dave", "Dave visited Carol before Bob", "distinct"),
    ],
)
def test_relate_follows_the_guard(a: str, b: str, expected: str) -> None:
    assert relate(a, b) == expected
    assert relate(b, a) == expected


@pytest.mark.model
def test_swapped_roles_are_both_injected(model_engine: MemoryEngine) -> None:
    true = model_engine.add("Alice currently works at Acme").memory
    swapped = model_engine.add("Acme works at Alice")
    assert swapped.decision != "auto_reject" and not swapped.duplicate  # the guard kept both
    inj = model_engine.inject("chat-42", "Can you draft Alice's bio?")
    assert {item.memory.id for item in inj.items} == {true.id, swapped.memory.id}
    assert "semantic_duplicate" not in inj.skipped
    assert any("Alice currently works at Acme" in line for line in lines(inj))


@pytest.mark.model
def test_a_changed_number_shows_the_newer_with_the_earlier(model_engine: MemoryEngine) -> None:
    old = model_engine.add("Priya is 34 years old.").memory
    new = model_engine.add("Priya is 35 years old.")
    assert not new.duplicate  # the write path keeps both (numbers differ)
    inj = model_engine.inject("chat-1", "How old is Priya?")
    assert shown_texts(inj) == ["Priya is 35 years old."]
    since, then = new.memory.created_at.date(), old.created_at.date()
    assert (
        f"[observation] Priya is 35 years old (since {since}; before: 34, as of {then})."
        in (lines(inj))
        or f"Priya is 35 years old (since {since}; before: 34, as of {then})." in inj.block
    )
    assert not any("Priya is 34" in line for line in lines(inj))  # never the older alone
    # the older was in the block (its value): a later turn does not show it alone either
    again = model_engine.inject("chat-1", "Remind me, how old is Priya?")
    assert not any("Priya is 34 years old" in line for line in lines(again))


@pytest.mark.model
def test_the_newer_value_wins_whichever_ranks_first(model_engine: MemoryEngine) -> None:
    # Written the other way round: 35 first, then 34 (a correction): 34 is the current value.
    model_engine.add("Priya is 35 years old.")
    model_engine.add("Priya is 34 years old.")
    inj = model_engine.inject("chat-2", "Is Priya 35 years old?")
    assert shown_texts(inj) == ["Priya is 34 years old."]
    assert "before: 35" in (inj.block or "")


@pytest.mark.model
def test_a_negation_is_shown_with_what_it_replaced(model_engine: MemoryEngine) -> None:
    model_engine.add("Tom eats meat on weekends.")
    model_engine.add("Tom does not eat meat on weekends.")
    inj = model_engine.inject(
        "dinner", "I'm planning a weekend dinner with Tom: does Tom eat meat?"
    )
    block = inj.block or ""
    assert shown_texts(inj) == ["Tom does not eat meat on weekends."]
    assert "Tom does not eat meat on weekends (since " in block
    assert "before: Tom eats meat on weekends, as of " in block
    assert not any(line.endswith("] Tom eats meat on weekends.") for line in lines(inj))


@pytest.mark.model
def test_an_update_after_the_older_was_shown(model_engine: MemoryEngine) -> None:
    model_engine.add("Priya is 34 years old.")
    first = model_engine.inject("chat-3", "How old is Priya?")
    assert shown_texts(first) == ["Priya is 34 years old."]  # the only value known then
    model_engine.add("Priya is 35 years old.")
    second = model_engine.inject("chat-3", "How old is Priya now?")
    # not a "semantic duplicate" of what turn 1 showed: the new value, with the old one
    assert shown_texts(second) == ["Priya is 35 years old."]
    assert "before: 34" in (second.block or "")


@pytest.mark.model
def test_a_paraphrase_is_still_a_duplicate(model_engine: MemoryEngine) -> None:
    model_engine.add("Alice works at Acme")
    other = model_engine.add("Alice is employed by Acme")
    assert not other.duplicate  # kept apart by the write path (a paraphrase, not the same words)
    inj = model_engine.inject("s", "Where does Alice work?")
    assert len(inj.items) == 1
    assert inj.skipped.get("semantic_duplicate") == 1


def test_near_pairs_judge_only_pairs_above_the_threshold(engine: MemoryEngine) -> None:
    """Step 5's buffer, with vectors placed by hand: a pair at exactly the threshold is not
    near (strictly above, as ``semantic_threshold`` is documented), one just above is; a shown
    memory's text is read from the store; an update shows the newer with the older's value."""
    shown = engine.add("Priya is 34 years old.").memory  # shown at an earlier turn (window)
    newer = engine.add("Priya is 35 years old.").memory  # its update, near it
    same = engine.add("Bob drinks green tea every afternoon").memory
    at_threshold = engine.add("Every afternoon Bob has green tea").memory  # a paraphrase
    above = engine.add("Bob has green tea every afternoon").memory
    far = engine.add("Carol plays the cello").memory
    assert len({m.id for m in (shown, newer, same, at_threshold, above, far)}) == 6  # all kept
    unit = np.eye(6, dtype=np.float32)

    def near(cos: float, axis: int, other: int) -> np.ndarray[Any, Any]:
        v = cos * unit[axis] + np.sqrt(1 - cos * cos) * unit[other]
        return np.asarray(v, dtype=np.float32)

    vectors = {
        shown.id: unit[0],
        newer.id: near(0.9, 0, 1),
        same.id: unit[2],
        at_threshold.id: near(0.85, 2, 3),
        above.id: near(0.8501, 2, 4),
        far.id: unit[5],
    }
    pairs = NearPairs(engine.store, shown.owner, 0.85, vectors, [shown.id, same.id])
    pairs.add_pool([newer, at_threshold, above, far])
    assert pairs.judge(far, set(), set()) == Verdict()
    assert pairs.judge(at_threshold, set(), set()) == Verdict()  # 0.85 is not above 0.85
    assert pairs.judge(above, set(), set()) == Verdict(skip="semantic_duplicate")
    update = pairs.judge(newer, set(), set())
    assert update.skip is None and update.folded == shown
    assert update.note is not None and "before: 34" in update.note
    # a memory without a vector (not embedded) is never judged a duplicate
    assert pairs.judge(engine.add("Dave is 40").memory, set(), set()) == Verdict()
