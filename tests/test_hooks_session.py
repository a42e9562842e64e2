"""A scripted 30-turn Claude Code session through ``memlane hook`` (a fresh process per call),
with a compaction in the middle and a resume later; once with a real ``memlane serve`` and once
with the engine in-process.

Checked: no memory is injected twice within the window (``context_window_depth`` turns) unless
the session was reset in between; what was injected before the compaction is injected again
after it; a resume keeps the tracking; every turn's recorded ids are exactly the printed block's.
The transcript (turn, prompt, injected memories, resets) is printed (``pytest -s``) and written
to ``<tmp>/session-transcript.txt``.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from conftest import Backend
from hook_support import OWNER, claude_payload, hook_paths, run_hook
from memlane import MemoryEngine

#: topic -> the memory about it.
TOPICS = {
    "database": "The main database is PostgreSQL 16 with pgvector",
    "deploy": "Deploys run through GitHub Actions every Friday afternoon",
    "indent": "Alice prefers tabs over spaces for indentation",
    "tests": "Run the tests with make test before every commit",
    "cat": "Alice's cat Miso sleeps on the keyboard",
    "coffee": "Alice drinks espresso and never decaf",
    "api": "The public API is versioned under the /v1 prefix",
    "lint": "Ruff and mypy strict gate every pull request",
    "cache": "Redis caches session tokens for fifteen minutes",
    "docs": "Documentation lives in the docs folder as Markdown",
}
#: topic -> a prompt about it (words shared with the memory, as a user would ask).
PROMPTS = {
    "database": "which database and extension does the main database use?",
    "deploy": "when do deploys run through GitHub Actions?",
    "indent": "tabs or spaces for indentation here?",
    "tests": "how do I run the tests before a commit?",
    "cat": "what is the name of Alice's cat Miso?",
    "coffee": "does Alice drink espresso or decaf?",
    "api": "how is the public API versioned?",
    "lint": "what gates every pull request, ruff or mypy?",
    "cache": "how long does Redis cache session tokens?",
    "docs": "where does the documentation live, Markdown in docs?",
}
#: The 30 turns: topics recur within the 10-turn window; PreCompact + SessionStart(compact)
#: before turn 16 (which asks turn 15's topic again); SessionStart(resume) before turn 23
#: (which asks turn 22's topic again).
SCRIPT = [
    "database", "deploy", "database", "indent", "tests", "deploy", "cat", "coffee", "api",
    "database", "lint", "cache", "docs", "indent", "tests",
    "tests", "database", "deploy", "cat", "coffee", "api", "lint",
    "lint", "cache", "docs", "database", "indent", "deploy", "tests", "database",
]  # fmt: skip
COMPACT_BEFORE = 16
RESUME_BEFORE = 23
DEPTH = 10  # the default context_window_depth


@pytest.fixture(params=["in-process", "server"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def session_env(mode: str, store_backend: Backend) -> Iterator[dict[str, str]]:
    engine = store_backend.engine()
    for topic, text in TOPICS.items():
        engine.add(text, owner=OWNER, type="preference" if topic == "indent" else "fact")
    engine.close()
    with hook_paths(mode, store_backend) as env:
        yield env


def test_scripted_30_turn_session(
    mode: str, session_env: dict[str, str], store_backend: Backend, tmp_path: Path
) -> None:
    env = session_env
    engine: MemoryEngine = store_backend.engine()
    name = {m.id: t for t in TOPICS for m in engine.list(owner=OWNER) if m.content == TOPICS[t]}
    session = f"cc-{mode}"
    lines: list[str] = [f"scripted session {session} ({mode}), window {DEPTH} turns"]
    injected_at: dict[str, list[int]] = {}
    resets: list[tuple[int, str]] = []  # (before turn, reason)

    def event(hook: str, turn: int, **fields: str) -> None:
        done = run_hook(env, hook, claude_payload(hook, session, tmp_path, **fields))
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        state = engine.session(session, owner=OWNER)
        what = fields.get("source") or fields.get("trigger") or ""
        lines.append(
            f"  -- {hook} {what}: reset={state.last_reset_reason or '-'}, "
            f"tracked={len(state.injected)}"
        )
        if hook == "PreCompact" or fields.get("source") in {"clear", "compact"}:
            resets.append((turn, "compact"))

    for turn, topic in enumerate(SCRIPT, 1):
        if turn == COMPACT_BEFORE:
            event("PreCompact", turn, trigger="auto")
            event("SessionStart", turn, source="compact")
        if turn == RESUME_BEFORE:
            event("SessionStart", turn, source="resume")
        # the topic of the turn before asked in other words (the same words right after are
        # the same turn to the turn model: a retry, nothing recorded)
        again = turn > 1 and SCRIPT[turn - 2] == topic
        prompt = f"{PROMPTS[topic]} Again, please." if again else PROMPTS[topic]
        done = run_hook(
            env, "UserPromptSubmit", claude_payload("UserPromptSubmit", session, tmp_path,
                                                    prompt=prompt)
        )  # fmt: skip
        assert done.returncode == 0 and done.stderr == ""
        context = done.context()
        shown = context.splitlines()[2:] if context else []
        printed = sorted(t for t, text in TOPICS.items() for x in shown if x.endswith(f"] {text}"))
        assert len(printed) == len(shown)  # every printed line is one of the memories
        recorded = engine.store.injection_events(OWNER, session, limit=1)[0]
        assert recorded["turn"] == turn
        assert sorted(name[i] for i in recorded["memory_ids"]) == printed  # printed = recorded
        for t in printed:
            injected_at.setdefault(t, []).append(turn)
        ids = {name[i]: i for i in recorded["memory_ids"]}
        shown_ids = ", ".join(f"{t} ({ids[t]})" for t in printed)
        lines.append(f"turn {turn:2d}  ask {topic:<8}  injected {shown_ids or '-'}")

    transcript = "\n".join(lines)
    (tmp_path / "session-transcript.txt").write_text(transcript + "\n")
    print("\n" + transcript)

    def reset_between(a: int, b: int) -> bool:
        return any(a < before <= b for before, _ in resets)

    for topic, turns in injected_at.items():  # never twice within the window without a reset
        for a, b in pairwise(turns):
            assert b - a >= DEPTH or reset_between(a, b), (topic, a, b)
    assert 15 in injected_at["tests"] or 5 in injected_at["tests"]
    assert COMPACT_BEFORE in injected_at["tests"]  # re-injected right after the compaction
    assert 3 not in injected_at.get("database", [])  # asked again at turn 3: already shown
    lint_before = [t for t in injected_at["lint"] if t < RESUME_BEFORE]
    assert lint_before and RESUME_BEFORE - lint_before[-1] < DEPTH
    assert RESUME_BEFORE not in injected_at["lint"]  # resume kept the tracking
    assert sum(len(v) for v in injected_at.values()) >= 12
