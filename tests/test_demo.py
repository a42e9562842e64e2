"""``make demo`` (scripts/demo.py) says what a newcomer needs: each duplicate-like line's decision
in words beside the stored memory it was compared with and the cosine, a summary whose numbers
add up, one injection block with the reasons the rest was left out, and the replay's recall beside
the BM25-alone and vector-alone baselines of the same run. Runs the real script with the real
model on the small sample conversation (``--sample``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def demo() -> str:
    env = {**os.environ, "COLUMNS": "400"}  # no cell wraps: a row is one line
    env.pop("MEMLANE_HOME", None)
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--sample"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_each_decision_in_words_beside_the_memory_it_was_compared_with(demo: str) -> None:
    flat = " ".join(demo.split())
    assert "gray_keep: stored apart: similar, but not close enough to merge" in flat
    assert "guard_keep: stored apart: a number changed, so a different fact" in flat
    assert "guard_keep: stored apart: the same words in another order" in flat
    assert "hash_exact: not stored: the same text" in demo
    # the changed number: the offered line, the stored memory it met, their cosine
    row = next(line for line in demo.splitlines() if "Alice is 35 years old." in line)
    assert "Alice is 34 years old." in row and re.search(r"0\.9\d\d", row), row


def test_a_rewording_is_not_called_a_different_fact(demo: str) -> None:
    """examples/memories.jsonl calls 'on weekday mornings' -> 'every weekday morning' a
    rewording: the demo says the guard could not prove it the same, not that it differs."""
    row = next(line for line in demo.splitlines() if "Portuguese every weekday" in line)
    assert "a rewording with other words" in row, row
    assert "different fact" not in row, row


def test_texts_are_shown_whole(demo: str) -> None:
    """The words that differ are often the last ones ('Python 3.5' / 'Python 35', 'in C#'):
    no text of the table is cut."""
    table = demo.split("Injection before alice's turn")[0]
    assert "..." not in table and "…" not in table
    assert "The weekly sync with the data team is at 4pm on Tuesdays." in table
    assert "The reporting service still runs on Python 3.5." in table
    assert "Bob maintains the invoicing tool written in C#." in table


def test_the_summary_adds_up(demo: str) -> None:
    match = re.search(
        r"(\d+) lines offered = (\d+) stored as memories of their own \((.*?)\) \+ (\d+) not "
        r"stored again \((.*?)\); the store holds (\d+) memories",
        " ".join(demo.split()),
    )
    assert match, demo
    offered, own, own_parts, again, again_parts, held = match.groups()
    assert int(offered) == int(own) + int(again)
    assert int(own) == int(held)
    counted = lambda parts: sum(int(n) for n in re.findall(r"[a-z_]+ (\d+)", parts.split(";")[0]))  # noqa: E731
    assert counted(own_parts) == int(own) and counted(again_parts) == int(again)


def test_one_injection_block_and_why_the_rest_was_left_out(demo: str) -> None:
    block = demo.split("Injection before alice's turn")[1].split("The same message, next turn")
    assert "[Context from memory]" in block[0] and "[Relevant to this message]" in block[0]
    assert "(no block this turn)" in block[1]
    # the older time as written, not the bare number ("before: 3")
    assert "at 4pm on Tuesdays (since " in block[0] and "; before: 3pm, as of " in block[0]
    assert "shown within the last turns (re-injection delay) (already_injected)" in block[1]


def test_recall_beside_both_baselines_of_the_same_run(demo: str) -> None:
    match = re.search(
        r"recall@10 over (\d+) questions: hybrid (\d\.\d+), vector alone (\d\.\d+), "
        r"BM25 alone (\d\.\d+) \(same run",
        " ".join(demo.split()),
    )
    assert match, demo[-2000:]
    assert int(match.group(1)) > 0
    # turns: those with a block of all turns, not "turns injected / without a block 46 / 32"
    turns = re.search(r"turns with a block\s*│\s*(\d+) of (\d+) \((\d+) without one\)", demo)
    assert turns, demo[-2000:]
    assert int(turns[1]) + int(turns[3]) == int(turns[2]) == 46
