"""The real OpenCode (``opencode-ai``, pinned in ``tests/client_support.py``) with memlane's
plugin installed by ``memlane hooks install --client opencode`` (one local JavaScript file in
``~/.config/opencode/plugins/``), driven by ``opencode run [--continue] PROMPT`` with an
OpenAI-compatible provider pointed at a fake chat-completions server on 127.0.0.1: the
assertions are on the requests the model received.

- the plugin's ``chat.message`` adds memlane's block as a text part of the user's message,
  with OpenCode's session id: the memory reaches the model and stays in the history; over six
  prompts every conversation request holds it once (OpenCode's title requests left aside);
- ``hooks uninstall`` removes the file.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import client_support as cs

pytestmark = pytest.mark.clients

DB = "The staging database is PostgreSQL 16 with pgvector, listening on port 5433"
ASKS = [
    "Which database does staging use?",
    "Which port does the staging database listen on?",
    "Is pgvector installed on the staging database?",
    "Remind me which database version staging runs",
    "Who owns the staging database?",
    "Can I connect to staging from my laptop?",
]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[cs.ClientLab]:
    try:
        made = cs.make_client_lab(tmp_path, "chat")
    except RuntimeError as exc:
        pytest.fail(f"the clients could not be installed: {exc}")
    try:
        yield made
    finally:
        made.close()


def conversation(lab: cs.ClientLab, memory: dict[str, str]) -> list[cs.Row]:
    """The rows of the conversation requests (not OpenCode's title requests)."""
    rows = cs.rows(lab.fake, memory)
    requests = lab.fake.model_requests()
    titled = {n for n, r in enumerate(requests, 1) if "Generate a title" in str(r.body)[:4000]}
    return [r for r in rows if r.n not in titled]


def test_opencode_plugin_injects_once_over_six_prompts(lab: cs.ClientLab) -> None:
    cs.opencode_config(lab)
    lab.install("opencode")
    plugin = lab.user_home / ".config" / "opencode" / "plugins" / "memlane.js"
    assert "chat.message" in plugin.read_text()
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = cs.added_memory(lab, DB)
    (mid,) = memory
    for n, ask in enumerate(ASKS):
        cs.opencode_run(lab, repo, ask, resume=n > 0)
    found = conversation(lab, memory)
    table = cs.table("opencode", found, {mid: "DB"})
    assert [r.memories.get(mid, 0) for r in found] == [1] * 6, table
    assert [r.blocks for r in found] == [1] * 6, table
    first = lab.fake.model_requests()[found[0].n - 1].body["messages"]
    user = [m for m in first if m.get("role") == "user"][-1]
    said = cs.request_text({"messages": [user]})
    assert ASKS[0] in said and cs.BLOCK in said  # a part of the user's message
    removed = subprocess.run(
        [sys.executable, "-m", "memlane", "hooks", "uninstall", "--client", "opencode"],
        env=lab.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert removed.returncode == 0 and not plugin.exists(), removed.stderr
