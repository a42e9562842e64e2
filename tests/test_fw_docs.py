"""docs/frameworks.md runs: each ``python`` block as a user would paste it, in its own process
and a fresh ``MEMLANE_HOME``, with ``OPENAI_BASE_URL`` at the fake OpenAI-compatible model
(tests/fw_support.py) and the hash embedder; the memory the block adds must reach the model's
requests (once each) or, for the blocks that call no model, what the block prints.

Also: the page's table is what scripts/framework_turns.py prints (its LangChain rows are checked
against a run of the script's LangChain part)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fw_support import FakeModel, request_text

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "frameworks.md"
BLOCK = re.compile(r"^### (.+?)\n.*?^```python\n(.*?)^```", re.S | re.M)
#: Each example's framework module (the block is skipped when it is not installed).
NEEDS = {
    "LangChain": "langchain",
    "LangGraph store (LangMem's namespaces)": "langgraph",
    "OpenAI Agents SDK": "agents",
    "Pydantic AI": "pydantic_ai",
    "LlamaIndex": "llama_index.core",
}
#: Examples whose framework has its own environment: tests/fwenvs/test_fw_<name>.py runs them
#: there with :func:`run_example` (the main environment cannot import that framework).
OWN_ENV = {
    "Google ADK": "adk",
    "Strands Agents": "strands",
    "CrewAI": "crewai",
    "AutoGen": "autogen",
}
MEMORY = "Fly.io"


def examples() -> list[tuple[str, str]]:
    return BLOCK.findall(PAGE.read_text())


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModel]:
    with FakeModel() as served:
        yield served


def test_the_page_has_one_example_per_framework() -> None:
    assert sorted(title for title, _ in examples()) == sorted([*NEEDS, *OWN_ENV])


HERE = [(t, c) for t, c in examples() if t not in OWN_ENV]


@pytest.mark.parametrize(("title", "code"), HERE, ids=[t for t, _ in HERE])
def test_example_runs(title: str, code: str, model: FakeModel, tmp_path: Path) -> None:
    pytest.importorskip(NEEDS[title])
    run_example(code, model, tmp_path)


def run_example(code: str, model: FakeModel, tmp_path: Path) -> None:
    """Run one example with this interpreter as the module docstring says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))}
    env |= {
        "MEMLANE_HOME": str(tmp_path),
        "MEMLANE_EMBEDDING__PROVIDER": "hash",
        "OPENAI_BASE_URL": model.url,
        "OPENAI_API_KEY": "test",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
        "PYTHONPATH": str(ROOT / "src"),
    }
    model.take()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    requests = model.take()
    if requests:  # the block ran an agent: every model call held the memory, once
        assert all(request_text(r).count(MEMORY) == 1 for r in requests), requests
    else:
        assert MEMORY in done.stdout, done.stdout


def test_the_pages_table_is_the_scripts_output(model: FakeModel) -> None:
    pytest.importorskip("langchain")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import framework_turns
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    rows = framework_turns.rows("langchain", model)
    assert len(rows) == 6  # three turns, two model calls each
    page = [line for line in PAGE.read_text().splitlines() if line.startswith("| langchain |")]
    assert rows == page
