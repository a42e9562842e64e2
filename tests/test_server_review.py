"""The review routes (``/v1/dedup-log/unreviewed``, ``.../{id}/confirm``, ``.../{id}/reverse``,
``/v1/dedup-log/review-llm``), ``POST /v1/learn`` and the LLM counters of ``/v1/stats``, through
httpx against the app; the model is a scripted server driven by the real SDK
(tests/llm_server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from conftest import Backend
from llm_server import Reply, Script, serve
from memlane.config import LLMSettings
from memlane.llm import make_llm
from memlane.server.app import create_app
from memlane.server.state import ServerState
from server_support import ALICE, auth, serve_app, token_settings

PROBLEM = "application/problem+json"
BASE = "The staging database runs on a large Postgres cluster in Frankfurt"
SPACED = BASE.replace("database", "data base")  # a compound variant: auto_reject


@pytest.fixture
def client(store_backend: Backend) -> Iterator[TestClient]:
    with serve_app(store_backend) as (client, _):
        yield client


def test_review_routes(client: TestClient) -> None:
    for text in (BASE, BASE, SPACED):
        assert client.post("/v1/memories", json={"memory": {"content": text}}).status_code == 200
    pending = client.get("/v1/dedup-log/unreviewed").json()
    assert [r["decision"] for r in pending] == ["auto_reject"]  # hash_exact: confirmed already
    row = pending[0]["id"]
    done = client.post(f"/v1/dedup-log/{row}/reverse")
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["action"] == "reversed" and body["restored"]["content"] == SPACED
    assert body["entry"]["review_status"] == "reversed"
    again = client.post(f"/v1/dedup-log/{row}/reverse")
    assert again.status_code == 422 and again.headers["content-type"] == PROBLEM
    assert "reversed already" in again.json()["detail"]
    missing = client.post("/v1/dedup-log/999/confirm")
    assert missing.status_code == 404 and "no dedup-log entry 999" in missing.json()["detail"]
    exact = next(
        r for r in client.get("/v1/dedup-log").json()["items"] if r["decision"] == "hash_exact"
    )
    same_text = client.post(f"/v1/dedup-log/{exact['id']}/reverse")  # nothing to restore
    assert same_text.status_code == 422 and "hash_exact" in same_text.json()["detail"]
    assert len(client.get("/v1/memories").json()["items"]) == 2
    assert client.get("/v1/dedup-log/unreviewed").json() == []
    no_llm = client.post("/v1/dedup-log/review-llm")
    assert no_llm.status_code == 422 and "llm.provider" in no_llm.json()["detail"]


def test_an_owner_token_reviews_only_its_own_rows(store_backend: Backend) -> None:
    with serve_app(store_backend, **token_settings()) as (client, state):
        state.engine.add(BASE, owner="bob")
        state.engine.add(SPACED, owner="bob")
        (row,) = state.engine.review_pending(owner="bob")
        as_alice = client.post(f"/v1/dedup-log/{row.id}/confirm", headers=auth(ALICE))
        assert as_alice.status_code == 404  # bob's row does not exist for alice
        assert client.get("/v1/dedup-log/unreviewed", headers=auth(ALICE)).json() == []
        assert state.engine.review_pending(owner="bob") == [row]


def test_learn_and_the_llm_counters_over_http(store_backend: Backend) -> None:
    pytest.importorskip("openai")
    learned = {
        "memories": [
            {"content": "The user is vegetarian.", "type": "preference", "importance": 0.8}
        ]
    }
    script = Script("openai", steps=[Reply(json.dumps(learned))])
    with serve(script) as url:
        llm = make_llm(LLMSettings(provider="openai", model="m", base_url=url, max_retries=0))
        engine = store_backend.engine(llm=llm)
        state = ServerState(engine, overrides={"store": store_backend.store_settings()})
        with TestClient(
            create_app(state), raise_server_exceptions=False, base_url="http://localhost"
        ) as client:
            chat = [
                {"role": "user", "content": "I'm vegetarian, by the way."},
                {"role": "assistant", "content": "Noted!"},
            ]
            resp = client.post("/v1/learn", json={"messages": chat, "owner": "alice"})
            assert resp.status_code == 200, resp.text
            (result,) = resp.json()
            assert result["decision"] == "added"
            assert result["memory"]["content"] == "The user is vegetarian."
            assert result["memory"]["owner"] == "alice"
            failed = client.post("/v1/learn", json={"messages": chat})  # the script ran out: 500s
            assert failed.status_code == 502 and failed.headers["content-type"] == PROBLEM
            stats = client.get("/v1/stats").json()["llm"]
    assert stats["provider"] == "openai" and stats["calls"] == 2 and stats["failures"] == 1
    assert stats["tokens_in"] > 0 and stats["tokens_out"] > 0


def test_learn_without_an_llm_names_the_setting(client: TestClient) -> None:
    resp = client.post("/v1/learn", json={"messages": [{"role": "user", "content": "hi there"}]})
    assert resp.status_code == 422 and "llm.provider" in resp.json()["detail"]
    assert client.get("/v1/stats").json()["llm"]["provider"] == "none"


def test_a_reverse_that_writes_nothing_is_a_409_naming_the_live_memory(
    client: TestClient,
) -> None:
    """As ``memlane review reverse`` exits 1: when a live memory already holds the text to
    restore, the answer is a 409 problem whose detail names that memory, and nothing changes."""
    (added,) = client.post("/v1/memories", json={"memory": {"content": BASE}}).json()["results"]
    first = added["memory"]
    (rejected,) = client.post("/v1/memories", json={"memory": {"content": SPACED}}).json()[
        "results"
    ]
    assert rejected["decision"] == "auto_reject", rejected
    (row,) = client.get("/v1/dedup-log/unreviewed").json()
    # someone gives the kept memory that very text meanwhile
    edited = client.patch(f"/v1/memories/{first['id']}", json={"content": SPACED})
    assert edited.status_code == 200, edited.text
    before = (client.get("/v1/memories").json(), client.get("/v1/dedup-log").json())
    answer = client.post(f"/v1/dedup-log/{row['id']}/reverse")
    assert answer.status_code == 409 and answer.headers["content-type"] == PROBLEM
    problem = answer.json()
    assert problem["title"] == "Conflict" and problem["status"] == 409
    assert f"entry {row['id']} not reversed" in problem["detail"]
    assert first["id"] in problem["detail"] and "nothing written" in problem["detail"]
    assert (client.get("/v1/memories").json(), client.get("/v1/dedup-log").json()) == before
    assert [r["id"] for r in client.get("/v1/dedup-log/unreviewed").json()] == [row["id"]]
    # the OpenAPI document says so: a 409 problem+json on the reverse route
    op = client.get("/openapi.json").json()["paths"]["/v1/dedup-log/{entry_id}/reverse"]["post"]
    assert list(op["responses"]["409"]["content"]) == [PROBLEM]
