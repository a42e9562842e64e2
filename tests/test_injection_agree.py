"""Injection agrees with the write path (issue 26, item 4): the near-duplicate filter asks the
guard, so swapped roles, changed numbers and negations are never "the same"; of a changed value
the newer memory is shown with the earlier value and both dates, never the older alone.

The scenarios are the README's, with the real default model: its cosine puts each pair above
the injection's ``semantic_threshold`` (0.85), which is what hid one memory of each pair before.
"""

from __future__ import annotations

from typing import Any

import pytest

from memlane import MemoryEngine
from memlane.injection.agree import relate


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
