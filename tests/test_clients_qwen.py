"""The real Qwen Code (``@qwen-code/qwen-code``, pinned in ``tests/client_support.py``) with
memlane's hooks installed by ``memlane hooks install --client qwen``, driven by ``qwen
[--continue] PROMPT`` against a fake OpenAI chat-completions server on 127.0.0.1: the
assertions are on the requests the model received.

- the memory reaches the model (its own part of the user's message, kept in the history),
  once: over six prompts, a tool call among them (Qwen fires ``UserPromptSubmit`` again on
  the continuation after the tool's result, with the turn's ``prompt_id``), no request holds
  it twice and every one holds it;
- after ``/compress`` (a real compression: the history replaced by a ``<state_snapshot>``)
  the ``PostCompact`` hook resets the session and the memory comes back on the next prompt;
- a memory the session stored through memlane's MCP ``remember`` is not injected back into
  it; a new session in the same repository gets it, one in another repository does not.
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
#: Qwen Code's own background memory (its extraction requests) off: only the conversation.
QUIET = {"memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False}}


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


def summary_requests(lab: cs.ClientLab) -> list[int]:
    """The numbers of the compression requests (the last message asks for a snapshot)."""
    out = []
    for n, request in enumerate(lab.fake.model_requests(), 1):
        last = (request.body.get("messages") or [{}])[-1]
        if "<state_snapshot>" in cs.request_text({"messages": [last]}):
            out.append(n)
    return out


def test_qwen_injects_once_through_a_tool_continuation_and_again_after_compress(
    lab: cs.ClientLab,
) -> None:
    cs.qwen_settings(lab, QUIET)
    lab.install("qwen")
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = cs.added_memory(lab, DB)
    (mid,) = memory
    lab.fake.tool_use_on["list the files"] = ("glob", {"pattern": "*"})
    prompts = [
        "Which database does staging use?",
        "Please list the files here",  # a tool call, then the continuation with its result
        "Which port does the staging database listen on?",
        "/compress",
        "Is pgvector installed on the staging database?",
        "Remind me which database version staging runs",
    ]
    for n, prompt in enumerate(prompts):
        cs.qwen_once(lab, repo, prompt, resume=n > 0)
    found = cs.rows(lab.fake, memory)
    table = cs.table("qwen", found, {mid: "DB"})
    summaries = summary_requests(lab)
    assert summaries, table  # a real compression
    turns = [r for r in found if r.n not in summaries]
    assert len(turns) == 6, table  # five prompts and the tool's continuation
    assert all(r.memories.get(mid, 0) <= 1 for r in found), table  # never twice in a request
    assert [r.memories.get(mid, 0) for r in turns] == [1] * 6, table
    assert [r.blocks for r in turns] == [1] * 6, table
    after = lab.fake.model_requests()[summaries[-1]]  # the first request after compressing
    assert "<state_snapshot>" in cs.request_text(after.body)  # the compressed history
    log = (lab.home / "logs" / "hooks.log").read_text()
    assert "PostCompact session=" in log and "reset (compact)" in log


def test_qwen_a_memory_remembered_through_mcp_is_not_injected_back(lab: cs.ClientLab) -> None:
    env = {k: lab.env[k] for k in ("MEMLANE_HOME", "MEMLANE_EMBEDDING__PROVIDER", "PYTHONPATH")}
    server = {"command": sys.executable, "args": ["-m", "memlane", "mcp"], "env": env,
              "trust": True}  # fmt: skip
    cs.qwen_settings(lab, {**QUIET, "mcpServers": {"memlane": server}})
    lab.install("qwen")
    shop = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    blog = cs.make_repo(lab.root / "blog", "https://github.com/acme/blog")
    lab.fake.tool_use_on["Please remember"] = ("mcp__memlane__remember", {"content": CI})
    cs.qwen_once(lab, shop, "Please remember the CI runner image.", resume=False)
    (stored,) = json.loads(lab.memlane("list", "--json"))
    assert stored["content"] == CI and stored["project"] == "github.com/acme/shop"
    memory = {stored["id"]: CI}
    asked = len(lab.fake.model_requests())
    assert asked == 2  # the prompt, then the tool's result
    cs.qwen_once(lab, shop, "Which image do the CI runners use?", resume=True)
    (later,) = cs.rows(lab.fake, memory)[asked:]
    table = cs.table("qwen", [later], {stored["id"]: "CI"})
    # its text in the call's arguments and in the tool's output, and no memlane block
    assert later.memories.get(stored["id"], 0) >= 2 and later.blocks == 0, table
    cs.qwen_once(lab, shop, "Which image do the CI runners use?", resume=False)
    cs.qwen_once(lab, blog, "Which image do the CI runners use?", resume=False)
    in_shop, in_blog = cs.rows(lab.fake, memory)[asked + 1 :]
    assert (in_shop.memories.get(stored["id"]), in_shop.blocks) == (1, 1)
    assert (in_blog.memories.get(stored["id"], 0), in_blog.blocks) == (0, 0)
