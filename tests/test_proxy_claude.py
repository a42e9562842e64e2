"""A second real application through the proxy: Claude Code (``@anthropic-ai/claude-code``,
pinned in ``tests/client_support.py``) with ``ANTHROPIC_BASE_URL`` on ``memlane proxy``, against
the fake Anthropic server of ``memlane.eval.fake_models``. Without memlane's hooks the proxy
brings the memory, once in every request of the session; with the hooks installed too, their
blocks are in the requests and the proxy adds no second copy."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import client_support as cs
from memlane.eval.bench.proxy import _free_port, _process

pytestmark = pytest.mark.clients

DB = "The staging database is PostgreSQL 16 with pgvector, listening on port 5433"
ASKS = [
    "Which database does staging use?",
    "Which port does the staging database listen on?",
    "Is pgvector installed on the staging database?",
]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[cs.Lab]:
    try:
        made = cs.make_lab(tmp_path)
    except RuntimeError as exc:
        pytest.fail(f"the clients could not be installed: {exc}")
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("hooks", [False, True], ids=["proxy-only", "hooks-and-proxy"])
def test_claude_code_through_the_proxy_gets_the_memory_once(lab: cs.Lab, hooks: bool) -> None:
    if not hooks:  # the user runs the proxy alone: memlane's hooks out of Claude Code
        settings = lab.user_home / ".claude" / "settings.json"
        config = json.loads(settings.read_text())
        config.pop("hooks", None)
        settings.write_text(json.dumps(config))
    memory = json.loads(lab.memlane("add", DB, "--json"))["memory"]
    mid = memory["id"]
    port = _free_port()
    upstreams = {"anthropic": {"url": lab.anthropic.url, "api": "anthropic"}}
    env = {**lab.env, "MEMLANE_PROXY__UPSTREAMS": json.dumps(upstreams)}
    proxy = [sys.executable, "-m", "memlane", "proxy", "--port", str(port)]
    lab.env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}/anthropic"
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    with _process(proxy, env, f"http://127.0.0.1:{port}/health"):
        cs.claude_session(lab, repo, ASKS)
    found = [r for r in cs.rows(lab.anthropic, {mid: DB}) if not r.summary]
    assert len(found) >= len(ASKS), cs.table("claude", found, {mid: "DB"})
    if not hooks:  # the proxy's block: the first text part of the session's first user turn
        first = lab.anthropic.model_requests()[-1].body["messages"][0]["content"]
        assert first[0]["type"] == "text" and first[0]["text"].startswith("[Context from memory]")
    # in every request of the session, exactly one copy (the proxy's, or the hooks' alone)
    assert [r.memories.get(mid) for r in found] == [1] * len(found), cs.table(
        "claude", found, {mid: "DB"}
    )
