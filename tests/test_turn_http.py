"""``POST /v1/turn`` on ``memlane serve`` and the hooks' backends: the same answers as
:meth:`memlane.MemoryEngine.turn`; owner tokens apply as for ``/v1/inject``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conftest import Backend
from memlane.hooks.backend import HttpBackend, LocalBackend
from memlane.server.state import ServerState
from server_support import ALICE, BOB, auth, run_server, serve_app, token_settings
from test_turn import FACTS, QUESTIONS

PROBLEM = "application/problem+json"


@pytest.fixture
def api(store_backend: Backend) -> Iterator[tuple[TestClient, ServerState]]:
    with serve_app(store_backend, **token_settings()) as pair:
        client, _ = pair
        for fact in FACTS:
            resp = client.post(
                "/v1/memories", json={"memory": {"content": fact}}, headers=auth(ALICE)
            )
            assert resp.status_code == 200
        yield pair


def comparable(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs between two sessions (keys, turn timings)."""
    items = [(i["memory"]["id"], i["source"]) for i in answer["items"]]
    earlier = [(b["position"], b["block"]) for b in answer["earlier"]]
    return {
        "repeat": answer["repeat"],
        "block": answer["block"],
        "items": items,
        "earlier": earlier,
        "reset": answer["reset"],
    }


def test_the_route_answers_what_the_engine_answers(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    calls = [(q, p) for p, q in enumerate(QUESTIONS[:4], start=1)]
    calls.insert(2, calls[1])  # a repeat of turn 2
    calls.append((QUESTIONS[0] + " again?", 2))  # a shrunk history
    for question, position in calls:
        body = {"session": "http", "message": question, "kept": False, "position": position}
        resp = client.post("/v1/turn", json=body, headers=auth(ALICE))
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        direct = state.engine.turn(
            "direct", question, kept=False, position=position, owner="alice"
        ).to_dict()
        assert comparable(answer) == comparable(direct)
        assert set(answer) == set(direct)
    assert answer["reset"] == "compact"


def test_an_owner_token_turns_only_its_own_sessions(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    body = {"session": "s", "message": QUESTIONS[0], "kept": True}
    mine = client.post("/v1/turn", json=body, headers=auth(ALICE)).json()
    assert "peanuts" in mine["block"]
    # bob's token sees none of alice's memories and cannot name her
    assert client.post("/v1/turn", json=body, headers=auth(BOB)).json()["block"] is None
    resp = client.post("/v1/turn", json={**body, "owner": "alice"}, headers=auth(BOB))
    assert resp.status_code == 404 and resp.headers["content-type"] == PROBLEM
    assert client.post("/v1/turn", json=body).status_code == 401
    assert state.engine.session("s", owner="bob").turn == 1  # bob's own turn only


@pytest.mark.parametrize(
    ("change", "field"),
    [({"kept": "true"}, "kept"), ({"position": 0}, "position"), ({"message": " "}, "message")],
)
def test_bad_bodies_name_the_field(
    api: tuple[TestClient, ServerState], change: dict[str, Any], field: str
) -> None:
    client, state = api
    body = {"session": "s", "message": QUESTIONS[0], "kept": True, **change}
    resp = client.post("/v1/turn", json=body, headers=auth(ALICE))
    assert resp.status_code == 422 and field in resp.text
    assert state.engine.session("s", owner="alice").turn == 0


def test_both_hook_backends_answer_the_same(
    store_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = store_backend.engine()
    for fact in FACTS:
        engine.add(fact)
    for name, value in store_backend.child_env().items():
        if name.startswith("MEMLANE_"):  # the in-process backend opens the store as hooks do
            monkeypatch.setenv(name, value)
    local = LocalBackend(str(store_backend.home))
    with run_server(store_backend) as served:
        http = HttpBackend(
            served.url, token="", connect_timeout_s=5, deadline=time.monotonic() + 120
        )
        try:
            for position, question in enumerate(QUESTIONS[:3], start=1):
                fields = {"kept": False, "position": position}
                over_http = http.turn("via-http", question, **fields)
                in_process = local.turn("in-process", question, **fields)
                assert comparable(over_http) == comparable(in_process)
                assert http.turn("via-http", question, **fields)["repeat"] is True
        finally:
            http.close()
            local.close()
