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
    env = {**os.environ, "COLUMNS": "200"}
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
    assert "gray_keep: stored apart: similar, but not close enough to merge" in demo
    assert "guard_keep: stored apart: the near-identical guard saw a different fact" in demo
    assert "hash_exact: not stored: the same text" in demo
    # the changed number: the offered line, the stored memory it met, their cosine
    row = next(line for line in demo.splitlines() if "Alice is 35 years old." in line)
    assert "Alice is 34 years old." in row and re.search(r"0\.9\d\d", row), row


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
    assert "shown within the last turns (re-injection delay) (already_injected)" in block[1]


def test_recall_beside_both_baselines_of_the_same_run(demo: str) -> None:
    match = re.search(
        r"recall@10 over (\d+) questions: hybrid (\d\.\d+), vector alone (\d\.\d+), "
        r"BM25 alone (\d\.\d+) \(same run",
        " ".join(demo.split()),
    )
    assert match, demo[-2000:]
    assert int(match.group(1)) > 0
