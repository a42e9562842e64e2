"""The real Codex CLI (``@openai/codex``, pinned in ``tests/client_support.py``) with memlane's
hooks installed by ``memlane hooks install --client codex`` (its trust recorded through
Codex's own app server, as ``/hooks`` does), driven by ``codex exec`` against a fake
Responses API server on 127.0.0.1: the assertions are on the requests the model received.

- the memory reaches the model as a developer message after the user's, once per session:
  no request of six turns holds it twice, and every one holds it (the block stays in
  Codex's history);
- after a real compaction (Codex's own, past ``model_auto_compact_token_limit``) the
  ``PostCompact`` hook resets the session and the memory comes back on the next prompt;
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
ASKS = [
    "Which database does staging use?",
    "Which port does the staging database listen on?",
    "Is pgvector installed on the staging database?",
    "Remind me which database version staging runs",
    "Who owns the staging database?",
    "Can I connect to staging from my laptop?",
]
#: What Codex sends as the last input of its compaction request (its local compaction prompt).
COMPACTION = "CONTEXT CHECKPOINT COMPACTION"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[cs.ClientLab]:
    try:
        made = cs.make_client_lab(tmp_path, "responses")
    except RuntimeError as exc:
        pytest.fail(f"the clients could not be installed: {exc}")
    try:
        yield made
    finally:
        made.close()


def compaction_requests(lab: cs.ClientLab) -> list[int]:
    out = []
    for n, request in enumerate(lab.fake.model_requests(), 1):
        last = (request.body.get("input") or [{}])[-1]
        if COMPACTION in cs.request_text({"messages": [last]}):
            out.append(n)
    return out


def test_codex_injects_once_over_six_turns_and_again_after_a_compaction(
    lab: cs.ClientLab,
) -> None:
    cs.codex_config(lab, model_auto_compact_token_limit=5000)
    said = lab.install("codex")
    assert "trusted memlane's 3 Codex hooks" in said  # Codex would skip them otherwise
    config = (lab.user_home / ".codex" / "config.toml").read_text()
    assert config.count("trusted_hash") == 3
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = cs.added_memory(lab, DB)
    (mid,) = memory
    for n, ask in enumerate(ASKS):
        if n == 2:  # the third answer reports 10,000 tokens: Codex compacts before the fourth
            lab.fake.big_usage_next = 10_000
        cs.codex_exec(lab, repo, ask, resume=n > 0)
    found = cs.rows(lab.fake, memory)
    table = cs.table("codex", found, {mid: "DB"})
    assert compaction_requests(lab) == [4], table  # a real compaction, Codex's own
    turns = [r for r in found if r.n != 4]
    assert all(r.memories.get(mid, 0) <= 1 for r in found), table  # never twice in a request
    # injected at the first prompt, kept in the history; after the compaction (which drops
    # the developer messages) injected again at the next prompt, then kept
    assert [r.memories.get(mid, 0) for r in turns] == [1] * 6, table
    assert [r.blocks for r in turns] == [1] * 6, table
    log = (lab.home / "logs" / "hooks.log").read_text()
    assert "PostCompact session=" in log and "reset (compact)" in log
    # the block lands as a developer message right after the user's prompt
    first = lab.fake.model_requests()[0].body["input"]
    at = next(n for n, i in enumerate(first) if cs.BLOCK in cs.request_text({"messages": [i]}))
    assert first[at]["role"] == "developer"
    assert ASKS[0] in cs.request_text({"messages": [first[at - 1]]})


def test_codex_a_memory_remembered_through_mcp_is_not_injected_back(lab: cs.ClientLab) -> None:
    """The model calls memlane's MCP ``remember`` (Codex runs the real ``memlane mcp``); the
    next prompt of that session finds the call in Codex's rollout file and leaves the memory
    out. A new session in the same repository gets it (a project memory), one in another
    repository does not."""
    env = {k: lab.env[k] for k in ("MEMLANE_HOME", "MEMLANE_EMBEDDING__PROVIDER", "PYTHONPATH")}
    server = [
        "", "[mcp_servers.memlane]", f"command = {json.dumps(sys.executable)}",
        'args = ["-m", "memlane", "mcp"]', "required = true",
        'default_tools_approval_mode = "approve"',
        "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }",
    ]  # fmt: skip
    cs.codex_config(lab)
    config = lab.user_home / ".codex" / "config.toml"
    config.write_text(config.read_text() + "\n".join(server) + "\n")
    lab.install("codex")
    shop = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    blog = cs.make_repo(lab.root / "blog", "https://github.com/acme/blog")
    lab.fake.tool_use_on["Please remember"] = ("mcp__memlane__remember", {"content": CI})
    cs.codex_exec(lab, shop, "Please remember the CI runner image.", resume=False)
    (stored,) = json.loads(lab.memlane("list", "--json"))
    assert stored["content"] == CI and stored["project"] == "github.com/acme/shop"
    memory = {stored["id"]: CI}
    asked = len(lab.fake.model_requests())
    assert asked == 2  # the prompt, then the tool's result
    cs.codex_exec(lab, shop, "Which image do the CI runners use?", resume=True)
    (later,) = cs.rows(lab.fake, memory)[asked:]
    table = cs.table("codex", [later], {stored["id"]: "CI"})
    # its text in the call's arguments and in the tool's output, and no memlane block
    assert later.memories.get(stored["id"], 0) == 2 and later.blocks == 0, table
    cs.codex_exec(lab, shop, "Which image do the CI runners use?", resume=False)
    cs.codex_exec(lab, blog, "Which image do the CI runners use?", resume=False)
    in_shop, in_blog = cs.rows(lab.fake, memory)[asked + 1 :]
    assert (in_shop.memories.get(stored["id"]), in_shop.blocks) == (1, 1)
    assert (in_blog.memories.get(stored["id"], 0), in_blog.blocks) == (0, 0)
