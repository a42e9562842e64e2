"""Secrets and private text never stored (issue #24): the rules' recall and precision on the
labelled set, redact and refuse through the engine, the API and the CLI, ``<private>`` spans,
and what ``learn`` sends to the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import Backend
from memlane import MemoryEngine
from memlane.cli import app
from memlane.cli.bench_secrets import evaluate
from memlane.errors import InvalidMemory
from memlane.privacy import strip_private
from memlane.types import Decision
from server_support import serve_app

DATA = Path(__file__).parent / "data" / "secrets.jsonl"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS = "AKIA" + "Q3EGRTW4XZ7PLM2K"


def test_the_rules_find_secrets_and_spare_look_alikes() -> None:
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    assert len(rows) == 200 and sum(r["label"] == "secret" for r in rows) == 100
    assert len({r["kind"] for r in rows if r["label"] == "secret"}) == 20
    result = evaluate(rows)
    print("secrets set:", {k: result[k] for k in ("recall", "precision", "kind_named_right")})
    assert result["recall"] >= 0.95, result["missed"]
    assert result["precision"] >= 0.95, result["false_positives"]


def test_private_spans_are_removed() -> None:
    assert strip_private("a <private>my ssn</private> b <PRIVATE>x</Private>c") == "a b c"
    assert strip_private("keep <private>unclosed to the end") == "keep"


def test_add_redacts_a_secret_by_default(engine: MemoryEngine) -> None:
    result = engine.add(f"the deploy token is {GITHUB} for acme/infra", owner="alice")
    stored = engine.get(result.memory.id, owner="alice")
    assert GITHUB not in stored.content
    assert stored.content == "the deploy token is [redacted:github_token] for acme/infra"
    assert stored.metadata["redacted"] == ["github_token"]
    assert engine.search("deploy token", owner="alice")[0].memory.id == stored.id
    again = engine.add(f"the deploy token is {GITHUB} for acme/infra", owner="alice")
    assert again.duplicate and again.memory.id == stored.id  # the same text once redacted
    log = engine.dedup_log(owner="alice")
    assert log and all(GITHUB not in (e.new_text or "") for e in log)


def test_refuse_writes_nothing_and_names_the_kind(make_engine: Any) -> None:
    engine = make_engine(privacy={"secrets": "refuse"})
    with pytest.raises(InvalidMemory) as caught:
        engine.add(f"aws key {AWS} for staging", owner="alice")
    message = str(caught.value)
    assert "aws_access_key_id" in message and AWS not in message and "refuse" in message
    assert engine.list(owner="alice") == [] and engine.dedup_log(owner="alice") == []
    with pytest.raises(InvalidMemory, match="metadata"):
        engine.add("the key is in the vault", owner="alice", metadata={"note": f"key {AWS}"})


def test_private_text_is_never_stored(engine: MemoryEngine) -> None:
    r = engine.add("my bank is <private>Acme Bank, account 1234</private> in town", owner="a")
    assert r.memory.content == "my bank is in town"  # one space where the span was
    assert "Acme" not in json.dumps([h.content for h in engine.history(r.memory.id, owner="a")])
    with pytest.raises(InvalidMemory, match="private"):
        engine.add("<private>only this</private>", owner="a")


def test_the_api_answers_422_when_refusing(store_backend: Backend) -> None:
    with serve_app(store_backend, privacy={"secrets": "refuse"}) as (client, _):
        resp = client.post(
            "/v1/memories", json={"memory": {"content": f"password: Tr0ub4dor&3 and {AWS}"}}
        )
        assert resp.status_code == 422
        assert "secret" in resp.json()["detail"] and "Tr0ub4dor" not in resp.text
        assert client.get("/v1/memories").json()["items"] == []


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_the_cli_redacts_and_the_file_never_holds_the_secret(store_backend: Backend) -> None:
    added = CliRunner().invoke(
        app, ["add", f"CI uses {GITHUB}", "--json"], env=store_backend.child_env()
    )
    assert added.exit_code == 0, added.output
    assert GITHUB not in added.output and "[redacted:github_token]" in added.output
    db = b"".join(p.read_bytes() for p in store_backend.home.rglob("*") if p.is_file())
    assert GITHUB.encode() not in db


def test_learn_never_sends_private_text_or_secrets_to_the_model(make_engine: Any) -> None:
    pytest.importorskip("openai")
    from llm_server import Reply, Script, serve
    from memlane.config import LLMSettings
    from memlane.llm import make_llm

    script = Script("openai")
    script.steps = [Reply(json.dumps({"memories": [{"content": "The user lives in Berlin."}]}))]
    chat = [
        {"role": "user", "content": "I live in Berlin. <private>My PIN is 4711.</private>"},
        {"role": "user", "content": f"my token is {GITHUB}"},
    ]
    with serve(script) as url:
        llm = make_llm(LLMSettings(provider="openai", model="m", base_url=url, max_retries=0))
        engine = make_engine(llm=llm)
        results = engine.learn(chat, owner="alice")
    assert [r.decision for r in results] == [Decision.ADDED]
    prompt = json.dumps(script.requests[0]["json"])
    assert "Berlin" in prompt and "4711" not in prompt and GITHUB not in prompt
    assert "[redacted:github_token]" in prompt
