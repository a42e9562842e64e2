"""Per framework, a 3-turn tool-using agent with memlane, and the memories each model call got.

Runs each framework adapter the test suite proves (tests/test_fw_*.py: their agents, the fake
OpenAI-compatible model of tests/fw_support.py, the scenario's store with the hash embedder) through
the scenario's three user turns (each: a tool call, then the answer: two model calls) and prints
one Markdown table row per model call: the memories the request held, whether it held the same
memlane text as its turn's first call, and whether any memory was in it twice. docs/frameworks.md
shows its output.

    python scripts/framework_turns.py            # every installed framework
    python scripts/framework_turns.py langchain  # one (langchain, openai-agents, pydantic-ai, llamaindex, adk, strands, crewai, autogen)

A framework with its own environment (tests/fwenvs/test_fw_<name>.py, built by `make fwenvs`) that
this interpreter cannot import is run by .fwenvs/<name>/bin/python (this script, `--rows NAME`).
Frameworks whose extra is not installed are skipped (said on stderr).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS, FWENVS = ROOT / "tests", ROOT / "tests" / "fwenvs"
sys.path[:0] = [str(TESTS), str(FWENVS)]

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
    "adk": _chat("test_fw_adk"),
    "strands": _chat("test_fw_strands"),
    "crewai": _chat("test_fw_crewai"),
    "autogen": _chat("test_fw_autogen"),
}


def own_env_rows(name: str) -> list[str] | None:
    """The rows of a framework with its own environment, from its Python (``None``: it has
    none, or that is this interpreter)."""
    python = ROOT / ".fwenvs" / name / "bin" / "python"
    if not (FWENVS / f"test_fw_{name}.py").exists() or not python.exists():
        return None
    if Path(sys.prefix).resolve() == python.parents[1].resolve():
        return None
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), __file__, "--rows", name],
        env=env, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    return done.stdout.splitlines()


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
    only_rows = argv[:1] == ["--rows"]
    wanted = argv[1:] if only_rows else argv or list(FRAMEWORKS)
    if not only_rows:
        print(
            "| Framework | Turn | Model call | Memories in the request | Same memlane text as the turn's first call | A memory twice |"
        )
        print("|---|---|---|---|---|---|")
    with fw.FakeModel() as model:
        for name in wanted:
            try:
                lines = rows(name, model)
            except (ImportError, pytest.skip.Exception) as missing:
                lines = None if only_rows else own_env_rows(name)
                if lines is None:
                    print(f"{name}: skipped ({missing})", file=sys.stderr)
                    continue
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
