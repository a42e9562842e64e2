"""Access: a token guards every route but /health; a token bound to one owner sees only that
owner's memories, sessions and log (404 for the rest, exactly as a missing id), route by route;
`memlane serve` refuses a non-loopback address without a token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from conftest import Backend
from memlane.cli import app as cli_app
from memlane.cli.serve import is_loopback
from server_support import ADMIN, ALICE, BOB, auth, serve_app, token_settings


@pytest.fixture
def client(store_backend: Backend) -> Iterator[TestClient]:
    with serve_app(store_backend, **token_settings()) as (client, _):
        yield client


@pytest.fixture
def alice_memory(client: TestClient) -> str:
    """One memory of alice's (added with her token), injected once in her session "chat"."""
    resp = client.post(
        "/v1/memories",
        json={"memory": {"content": "Alice's staging database is Postgres"}},
        headers=auth(ALICE),
    )
    assert resp.status_code == 200
    client.post(
        "/v1/memories",
        json={"memory": {"content": "Alice's staging database is Postgres"}},
        headers=auth(ALICE),
    )  # a hash_exact row in alice's dedup log
    inject = {"session": "chat", "text": "what is the staging database Postgres?"}
    assert "Postgres" in client.post("/v1/inject", json=inject, headers=auth(ALICE)).json()["block"]
    memory = resp.json()["results"][0]["memory"]
    assert memory["owner"] == "alice"
    return str(memory["id"])


def test_health_needs_no_token(client: TestClient) -> None:
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}]
)
def test_routes_need_a_valid_token(client: TestClient, headers: dict[str, str]) -> None:
    for method, path in [
        ("get", "/v1/memories"),
        ("post", "/v1/search"),
        ("get", "/v1/stats"),
        ("get", "/v1/settings/injection"),
        ("get", "/memories"),
        ("get", "/openapi.json"),
    ]:
        resp = client.request(method, path, headers=headers, json={"query": "x"})
        assert resp.status_code == 401, path
        assert resp.headers["www-authenticate"] == "Bearer"
        assert resp.headers["content-type"].startswith("application/problem+json")


def test_admin_token_sees_every_owner(client: TestClient, alice_memory: str) -> None:
    resp = client.get(
        f"/v1/memories/{alice_memory}", params={"owner": "alice"}, headers=auth(ADMIN)
    )
    assert resp.status_code == 200
    assert client.get("/v1/stats", headers=auth(ADMIN)).json()["memories_by_owner"] == {"alice": 1}


def test_owner_token_acts_for_its_owner(client: TestClient, alice_memory: str) -> None:
    resp = client.get(f"/v1/memories/{alice_memory}", headers=auth(ALICE))
    assert resp.status_code == 200 and resp.json()["owner"] == "alice"


FOREIGN_ID_ROUTES = [
    ("get", ""),
    ("patch", ""),
    ("delete", ""),
    ("get", "/history"),
    ("get", "/associations"),
]


@pytest.mark.parametrize(("method", "suffix"), FOREIGN_ID_ROUTES)
def test_other_owners_memory_is_404(
    client: TestClient, alice_memory: str, method: str, suffix: str
) -> None:
    body = {"content": "Bob rewrites it"} if method == "patch" else None
    for params in ({}, {"owner": "alice"}):
        resp = client.request(
            method,
            f"/v1/memories/{alice_memory}{suffix}",
            params=params,
            json=body,
            headers=auth(BOB),
        )
        assert resp.status_code == 404
    kept = client.get(f"/v1/memories/{alice_memory}", headers=auth(ALICE)).json()
    assert kept["content"] == "Alice's staging database is Postgres" and kept["status"] == "active"


def test_other_owner_in_list_search_inject_log_is_404_or_empty(
    client: TestClient, alice_memory: str
) -> None:
    bob = auth(BOB)
    assert client.get("/v1/memories", params={"owner": "alice"}, headers=bob).status_code == 404
    assert client.get("/v1/memories", headers=bob).json()["items"] == []
    assert (
        client.post(
            "/v1/search", json={"query": "staging", "owner": "alice"}, headers=bob
        ).status_code
        == 404
    )
    assert (
        client.post("/v1/search", json={"query": "staging Postgres"}, headers=bob).json()["hits"]
        == []
    )
    inject = {"session": "chat", "text": "what is the staging database Postgres?"}
    assert (
        client.post("/v1/inject", json={**inject, "owner": "alice"}, headers=bob).status_code == 404
    )
    assert client.post("/v1/inject", json=inject, headers=bob).json()["block"] is None
    assert client.get("/v1/dedup-log", params={"owner": "alice"}, headers=bob).status_code == 404
    assert client.get("/v1/dedup-log", headers=bob).json()["items"] == []
    alice_log = client.get("/v1/dedup-log", headers=auth(ALICE)).json()["items"]
    assert [e["decision"] for e in alice_log] == ["hash_exact"]


def test_other_owners_session_is_out_of_reach(client: TestClient, alice_memory: str) -> None:
    bob = auth(BOB)
    assert (
        client.get("/v1/sessions/chat", params={"owner": "alice"}, headers=bob).status_code == 404
    )
    reset = {"reason": "clear", "owner": "alice"}
    assert client.post("/v1/sessions/chat/reset", json=reset, headers=bob).status_code == 404
    # bob's own session of the same id is his, empty; alice's is untouched
    assert client.get("/v1/sessions/chat", headers=bob).json()["turn"] == 0
    alice = client.get("/v1/sessions/chat", headers=auth(ALICE)).json()
    assert alice["turn"] == 1 and alice_memory in alice["injected"]


def test_stats_of_an_owner_token_count_only_that_owner(
    client: TestClient, alice_memory: str
) -> None:
    client.post("/v1/memories", json={"memory": {"content": "Bob likes tea"}}, headers=auth(BOB))
    assert client.get("/v1/stats", headers=auth(BOB)).json()["memories_by_owner"] == {"bob": 1}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/settings/injection"),
        ("put", "/v1/settings/injection"),
        ("get", "/v1/agents/coder/settings/injection"),
        ("put", "/v1/agents/coder/settings/injection"),
        ("delete", "/v1/agents/coder/settings/injection"),
    ],
)
def test_settings_are_404_for_owner_tokens(client: TestClient, method: str, path: str) -> None:
    body = {"max_total": 2} if method == "put" else None
    assert client.request(method, path, json=body, headers=auth(ALICE)).status_code == 404
    assert (
        client.get("/v1/settings/injection", headers=auth(ADMIN)).json()["settings"]["max_total"]
        == 25
    )


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")


def test_serve_refuses_a_public_address_without_token(store_backend: Backend) -> None:
    result = CliRunner().invoke(
        cli_app, ["serve", "--home", str(store_backend.home), "--host", "0.0.0.0"]
    )
    assert result.exit_code == 5
    assert "token" in result.output


def test_a_reload_never_drops_the_token(store_backend: Backend) -> None:
    (store_backend.home / "memlane.toml").write_text(f"[server]\ntoken = '{ADMIN}'\n")
    with serve_app(store_backend) as (client, state):
        assert client.get("/v1/stats").status_code == 401
        state.path.write_text("[injection]\nmax_total = 7\n")  # the token removed by hand
        assert state.check_file() is True
        assert client.get("/v1/stats").status_code == 401
        resp = client.get("/v1/settings/injection", headers=auth(ADMIN))
        assert resp.json()["settings"]["max_total"] == 7


def test_cors_is_off_unless_configured(store_backend: Backend) -> None:
    preflight = {"origin": "http://example.test", "access-control-request-method": "POST"}
    with serve_app(store_backend) as (client, _):
        resp = client.options("/v1/search", headers=preflight)
        assert "access-control-allow-origin" not in resp.headers
    with serve_app(store_backend, server={"cors_origins": ["http://example.test"]}) as (client, _):
        resp = client.options("/v1/search", headers=preflight)
        assert resp.headers["access-control-allow-origin"] == "http://example.test"
