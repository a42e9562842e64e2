"""The real OpenCode (``opencode-ai``, pinned in ``tests/client_support.py``) with memlane's
plugin installed by ``memlane hooks install --client opencode`` (one local JavaScript file in
``~/.config/opencode/plugins/``), driven by ``opencode run [--continue] PROMPT`` with an
OpenAI-compatible provider pointed at a fake chat-completions server on 127.0.0.1: the
assertions are on the requests the model received.

- the plugin's ``chat.message`` adds memlane's block as a text part of the user's message,
  with OpenCode's session id: the memory reaches the model and stays in the history; over six
  prompts every conversation request holds it once (OpenCode's title requests left aside);
- OpenCode's own compaction (a small model ``limit`` and a reply reporting a large usage):
  ``session.compacted`` resets memlane's session, the next prompt brings the memory back once;
- a memory the session stored through memlane's MCP ``remember`` is not injected back into
  it (the plugin reads the session's messages); a new session in the same repository gets it,
  one in another repository does not;
- ``hooks uninstall`` removes the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import client_support as cs
from memlane.eval.fake_openai import SUMMARY

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


def test_opencode_compaction_brings_the_memory_back_once(lab: cs.ClientLab) -> None:
    """OpenCode's own auto-compaction: the model's context is 20,000 tokens and the third
    reply reports 50,000 prompt tokens, so OpenCode summarises the session in that same run
    (its overflow check) and the history no longer holds the block. The plugin's
    ``session.compacted`` event resets memlane's session: the next prompt gets the block
    again, once. Before (the plugin without its ``event`` hook): no block after the
    compaction, the memory gone from every later request."""
    cs.opencode_config(lab, limit={"context": 20000, "output": 1000})
    lab.install("opencode")
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = cs.added_memory(lab, DB)
    (mid,) = memory
    for n, ask in enumerate(ASKS):
        if n == 2:
            lab.fake.big_usage_next = 50_000  # this prompt's reply overflows the context
        cs.opencode_run(lab, repo, ask, resume=n > 0)
    found = conversation(lab, memory)
    requests = lab.fake.model_requests()
    summarised = [r.n for r in found if SUMMARY in cs.request_text(requests[r.n - 1].body)]
    assert summarised, cs.table("opencode: no compaction", found, {mid: "DB"})
    # the summary request itself, then the requests that carry the summary
    compaction, after = summarised[0] - 1, [r for r in found if r.n >= summarised[0]]
    table = cs.table(f"opencode (compacted at request {compaction})", found, {mid: "DB"})
    before = [r for r in found if r.n < compaction]
    assert [r.memories.get(mid, 0) for r in before] == [1] * len(before), table
    asked = [r for r in after if _asks(requests[r.n - 1].body, ASKS[3:])]
    # OpenCode's synthetic "Continue" request holds no memory; each later prompt's request
    # holds the block brought back at the first prompt after the compaction, once
    assert len(asked) == 3 and after[0] not in asked, table
    assert [(r.memories.get(mid, 0), r.blocks) for r in asked] == [(1, 1)] * 3, table
    assert (after[0].memories.get(mid, 0), after[0].blocks) == (0, 0), table
    last = [m for m in requests[asked[0].n - 1].body["messages"] if m.get("role") == "user"][-1]
    said = cs.request_text({"messages": [last]})
    assert ASKS[3] in said and cs.BLOCK in said  # the block came back with that prompt
    log = (lab.home / "logs" / "hooks.log").read_text()
    assert "PostCompact" in log and "reset (compact)" in log, log[-2000:]


def test_opencode_a_memory_remembered_through_mcp_is_not_injected_back(lab: cs.ClientLab) -> None:
    """The model calls memlane's MCP ``remember`` (OpenCode runs the real ``memlane mcp`` from
    ``opencode.json``'s ``mcp``); at the next prompt of that session the plugin finds the call
    in the session's messages and the hook leaves the memory out. A new session in the same
    repository gets it, one in another repository does not. Before (the plugin sending no
    ``memlane_remembered``): the next prompt's request held the block with the memory."""
    cs.opencode_config(lab)
    config_path = lab.user_home / ".config" / "opencode" / "opencode.json"
    config = json.loads(config_path.read_text())
    env = {k: lab.env[k] for k in ("MEMLANE_HOME", "MEMLANE_EMBEDDING__PROVIDER", "PYTHONPATH")}
    config["mcp"] = {"memlane": {"type": "local", "environment": env,
                                 "command": [sys.executable, "-m", "memlane", "mcp"]}}  # fmt: skip
    config_path.write_text(json.dumps(config))
    lab.install("opencode")
    shop = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    blog = cs.make_repo(lab.root / "blog", "https://github.com/acme/blog")
    cs.opencode_run(lab, shop, "Hello there.", resume=False)
    lab.fake.tool_use_on["Please remember"] = ("memlane_remember", {"content": CI})
    cs.opencode_run(lab, shop, "Please remember the CI runner image.", resume=True)
    (stored,) = json.loads(lab.memlane("list", "--json"))
    assert stored["content"] == CI and stored["project"] == "github.com/acme/shop"
    memory = {stored["id"]: CI}
    asked = len(lab.fake.model_requests())
    cs.opencode_run(lab, shop, "Which image do the CI runners use?", resume=True)
    (later,) = conversation(lab, memory)[-1:]
    assert later.n > asked
    table = cs.table("opencode", [later], {stored["id"]: "CI"})
    # its text in the call's arguments and in the tool's result, and no memlane block
    assert later.memories.get(stored["id"], 0) >= 2 and later.blocks == 0, table
    cs.opencode_run(lab, shop, "Which image do the CI runners use?", resume=False)
    in_shop = conversation(lab, memory)[-1]
    cs.opencode_run(lab, blog, "Which image do the CI runners use?", resume=False)
    in_blog = conversation(lab, memory)[-1]
    assert (in_shop.memories.get(stored["id"]), in_shop.blocks) == (1, 1)
    assert (in_blog.memories.get(stored["id"], 0), in_blog.blocks) == (0, 0)


def _asks(body: dict[str, object], asks: list[str]) -> bool:
    """Whether the request's last user message is one of ``asks``."""
    messages = body.get("messages")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"] if (
        isinstance(messages, list)) else []  # fmt: skip
    said = cs.request_text({"messages": users[-1:]})
    return any(ask in said for ask in asks)
