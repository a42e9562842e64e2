"""The real GitHub Copilot CLI (``@github/copilot``, pinned in ``tests/client_support.py``) with
memlane's hooks installed by ``memlane hooks install --client copilot`` (a version-1 file in
``~/.copilot/hooks/``), driven by ``copilot -p PROMPT [--continue]`` with its own-key provider
(``COPILOT_PROVIDER_BASE_URL``: no GitHub sign-in) pointed at a fake OpenAI chat-completions
server on 127.0.0.1: the assertions are on the requests the model received.

- the hook reads Copilot's camelCase payload (``sessionId``) and answers with a top-level
  ``additionalContext``: the memory reaches the model inside the user's message (a
  ``<system_reminder>``), kept in the history: over six prompts every request holds it once;
- a memory the session stored through memlane's MCP ``remember`` is not injected back into it
  (the hook reads Copilot's session events); a new session in the same repository gets it,
  one in another repository does not;
- Copilot's compaction (``preCompact``) resets the session (the hook maps it onto
  ``PreCompact``): driven with ``copilot -p /compact --continue`` (its slash command runs in
  prompt mode), the next prompt brings the memory back once. (Its automatic compaction did not
  start with a small ``COPILOT_PROVIDER_MAX_PROMPT_TOKENS`` and large reported usage.)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import client_support as cs

pytestmark = pytest.mark.clients

DB = "The staging database is PostgreSQL 16 with pgvector, listening on port 5433"
CI = "The CI runners use Ubuntu 24.04 images with 8 GB of memory"
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


def test_copilot_reads_camel_case_and_injects_once_over_six_prompts(lab: cs.ClientLab) -> None:
    """Before: the hook, wired by hand, logged "the payload has no session_id" (camelCase
    ``sessionId``), and a Claude-style ``hookSpecificOutput`` never reached the model."""
    lab.install("copilot")
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = cs.added_memory(lab, DB)
    (mid,) = memory
    for n, ask in enumerate(ASKS):
        cs.copilot_once(lab, repo, ask, resume=n > 0)
    found = cs.rows(lab.fake, memory)
    table = cs.table("copilot", found, {mid: "DB"})
    # injected at the first prompt, kept in the history: one copy in every request
    assert [r.memories.get(mid, 0) for r in found] == [1] * 6, table
    assert [r.blocks for r in found] == [1] * 6, table
    first = lab.fake.model_requests()[0].body["messages"]
    user = [m for m in first if m.get("role") == "user"][-1]
    said = cs.request_text({"messages": [user]})
    assert ASKS[0] in said and cs.BLOCK in said  # inside the user's message
    log = (lab.home / "logs" / "hooks.log").read_text()
    assert "no session_id" not in log


def test_copilot_a_memory_remembered_through_mcp_is_not_injected_back(lab: cs.ClientLab) -> None:
    """The model calls memlane's MCP ``remember`` (Copilot runs the real ``memlane mcp`` from
    ``~/.copilot/mcp-config.json``); the next prompt of that session finds the call in
    Copilot's session events and leaves the memory out. A new session in the same repository
    gets it, one in another repository does not."""
    env = {k: lab.env[k] for k in ("MEMLANE_HOME", "MEMLANE_EMBEDDING__PROVIDER", "PYTHONPATH")}
    server = {"type": "local", "command": sys.executable, "args": ["-m", "memlane", "mcp"],
              "env": env, "tools": ["*"]}  # fmt: skip
    config = lab.user_home / ".copilot" / "mcp-config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"mcpServers": {"memlane": server}}))
    lab.install("copilot")
    shop = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    blog = cs.make_repo(lab.root / "blog", "https://github.com/acme/blog")
    cs.copilot_once(lab, shop, "Hello there.", resume=False)  # MCP servers connect meanwhile
    lab.fake.tool_use_on["Please remember"] = ("memlane-remember", {"content": CI})
    cs.copilot_once(lab, shop, "Please remember the CI runner image.", resume=True)
    (stored,) = json.loads(lab.memlane("list", "--json"))
    assert stored["content"] == CI and stored["project"] == "github.com/acme/shop"
    memory = {stored["id"]: CI}
    asked = len(lab.fake.model_requests())
    cs.copilot_once(lab, shop, "Which image do the CI runners use?", resume=True)
    (later,) = cs.rows(lab.fake, memory)[asked:]
    table = cs.table("copilot", [later], {stored["id"]: "CI"})
    # its text in the call's arguments and in the tool's result, and no memlane block
    assert later.memories.get(stored["id"], 0) >= 2 and later.blocks == 0, table
    cs.copilot_once(lab, shop, "Which image do the CI runners use?", resume=False)
    cs.copilot_once(lab, blog, "Which image do the CI runners use?", resume=False)
    in_shop, in_blog = cs.rows(lab.fake, memory)[asked + 1 :]
    assert (in_shop.memories.get(stored["id"]), in_shop.blocks) == (1, 1)
    assert (in_blog.memories.get(stored["id"], 0), in_blog.blocks) == (0, 0)


def test_copilot_compact_brings_the_memory_back_once(lab: cs.ClientLab) -> None:
    """``copilot -p /compact --continue`` summarises the session (Copilot's ``preCompact``
    hook runs first; the request asks for "a detailed summary of the conversation"), and the
    history after it holds the summary only. memlane's session is reset: the next prompt's
    block brings the memory back, once in every later request. Before (no ``preCompact``
    hook): the memory was in no request after the compaction."""
    lab.install("copilot")
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = cs.added_memory(lab, DB)
    (mid,) = memory
    for n, ask in enumerate(ASKS):
        if n == 3:
            cs.copilot_once(lab, repo, "/compact", resume=True)
        cs.copilot_once(lab, repo, ask, resume=n > 0)
    found = cs.rows(lab.fake, memory)
    table = cs.table("copilot", found, {mid: "DB"})
    summaries = [r.n for r in found if r.summary]
    assert len(summaries) == 1, table
    before = [r for r in found if r.n < summaries[0]]
    after = [r for r in found if r.n > summaries[0]]
    assert [(r.memories.get(mid, 0), r.blocks) for r in before] == [(1, 1)] * 3, table
    assert [(r.memories.get(mid, 0), r.blocks) for r in after] == [(1, 1)] * 3, table
    first = lab.fake.model_requests()[after[0].n - 1].body["messages"]
    user = [m for m in first if m.get("role") == "user"][-1]
    said = cs.request_text({"messages": [user]})
    assert ASKS[3] in said and cs.BLOCK in said  # the block came back with that prompt
    log = (lab.home / "logs" / "hooks.log").read_text()
    assert "PreCompact" in log and "reset (compact)" in log, log[-2000:]
