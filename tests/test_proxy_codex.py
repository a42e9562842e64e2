"""A real application through the proxy: Codex CLI (``@openai/codex``, pinned in
``tests/client_support.py``) with a custom provider on the Responses API whose base URL is
``memlane proxy``, memlane's hooks NOT installed, against the fake Responses server of
``memlane.eval.fake_models``: the memory reaches the model in the proxy's block, every request of
three turns holds it exactly once, and each request's conversation starts with the previous
one's (the prompt cache's prefix)."""

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
def lab(tmp_path: Path) -> Iterator[cs.ClientLab]:
    try:
        made = cs.make_client_lab(tmp_path, "responses")
    except RuntimeError as exc:
        pytest.fail(f"the clients could not be installed: {exc}")
    try:
        yield made
    finally:
        made.close()


def test_codex_through_the_proxy_gets_each_memory_once_with_a_stable_prefix(
    lab: cs.ClientLab,
) -> None:
    lab.memlane("add", DB)
    port = _free_port()
    upstreams = {"openai": {"url": lab.fake.url + "/v1", "api": "openai"}}
    env = {**lab.env, "MEMLANE_PROXY__UPSTREAMS": json.dumps(upstreams)}
    proxy = [sys.executable, "-m", "memlane", "proxy", "--port", str(port)]
    lines = ['model = "fake-model"', 'model_provider = "memlane"', "",
             "[model_providers.memlane]", 'name = "OpenAI through memlane"',
             f'base_url = "http://127.0.0.1:{port}/openai/v1"', 'wire_api = "responses"',
             'env_key = "FAKE_OPENAI_KEY"']  # fmt: skip
    config = lab.user_home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("\n".join(lines) + "\n")
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    with _process(proxy, env, f"http://127.0.0.1:{port}/health"):
        for n, ask in enumerate(ASKS):
            cs.codex_exec(lab, repo, ask, resume=n > 0)
    requests = lab.fake.model_requests()
    assert len(requests) >= len(ASKS)
    previous: list[object] | None = None
    for request in requests:
        text = cs.input_text(request.body)
        assert text.count(DB) == 1, f"the memory {text.count(DB)} times in one request"
        items = request.body["input"]
        if previous is not None:  # the conversation so far, byte for byte, then the new turn
            assert items[: len(previous)] == previous
        previous = items
