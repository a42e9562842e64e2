"""Per framework, a 3-turn tool-using agent with memlane, and the memories each model call got.

Runs each framework adapter the test suite proves (tests/test_fw_*.py: their agents, the fake
OpenAI-compatible model of tests/fw_support.py, the scenario's store with the hash embedder) through
the scenario's three user turns (each: a tool call, then the answer: two model calls) and prints
one Markdown table row per model call: the memories the request held, whether it held the same
memlane text as its turn's first call, and whether any memory was in it twice. docs/frameworks.md
shows its output.

    python scripts/framework_turns.py            # every installed framework
    python scripts/framework_turns.py langchain  # one (langchain, openai-agents, pydantic-ai, llamaindex)

Frameworks whose extra is not installed are skipped (said on stderr).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

import pytest  # noqa: E402  (the test modules skip themselves without their framework)

import fw_support as fw  # noqa: E402

#: Short names of the scenario's memories in the table.
LABELS = {fw.DEPLOY: "deploy target", fw.TABS: "tabs", fw.OTHER: "other project", fw.BOBS: "Bob's"}


@contextlib.contextmanager
def langchain(model: fw.FakeModel, engine: Any) -> Iterator[Callable[[str], object]]:
    t = importlib.import_module("test_fw_langchain")
    agent = t.make_agent(model, engine)
    yield lambda text: t.ask(agent, text, thread="script")


def _chat(module: str) -> Callable[[fw.FakeModel, Any], Any]:
    @contextlib.contextmanager
    def run(model: fw.FakeModel, engine: Any) -> Iterator[Callable[[str], object]]:
        chat = importlib.import_module(module).Chat(model, engine)
        try:
            yield chat.ask
        finally:
            chat.close()

    return run


FRAMEWORKS: dict[str, Callable[[fw.FakeModel, Any], Any]] = {
    "langchain": langchain,
    "openai-agents": _chat("test_fw_openai_agents"),
    "pydantic-ai": _chat("test_fw_pydantic_ai"),
    "llamaindex": _chat("test_fw_llamaindex"),
}


def rows(name: str, model: fw.FakeModel) -> list[str]:
    """The table rows of one framework's three turns."""
    out = []
    with tempfile.TemporaryDirectory() as home:
        engine = fw.open_engine(Path(home))
        try:
            with FRAMEWORKS[name](model, engine) as ask:
                model.take()
                for turn, text in enumerate(fw.TURNS, 1):
                    ask(text)
                    requests = model.take()
                    first = fw.block_of(requests[0]) if requests else None
                    for call, body in enumerate(requests, 1):
                        counts = fw.memory_counts(body, fw.MEMORIES)
                        held = ", ".join(LABELS[m] for m in fw.MEMORIES if counts[m]) or "none"
                        same = "yes" if fw.block_of(body) == first else "NO"
                        twice = "no" if max(counts.values()) <= 1 else "YES"
                        out.append(f"| {name} | {turn} | {call} | {held} | {same} | {twice} |")
        finally:
            engine.close()
    return out


def main(argv: list[str]) -> int:
    wanted = argv or list(FRAMEWORKS)
    print(
        "| Framework | Turn | Model call | Memories in the request | Same memlane text as the turn's first call | A memory twice |"
    )
    print("|---|---|---|---|---|---|")
    with fw.FakeModel() as model:
        for name in wanted:
            try:
                lines = rows(name, model)
            except (ImportError, pytest.skip.Exception) as missing:
                print(f"{name}: skipped ({missing})", file=sys.stderr)
                continue
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
