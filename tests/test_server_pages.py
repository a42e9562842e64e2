"""The web pages through httpx: each renders what an operator needs (the JavaScript flows are
driven in a real browser by test_server_browser.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from conftest import Backend
from memlane.server.state import ServerState
from server_support import ALICE, auth, serve_app, token_settings


@pytest.fixture
def api(store_backend: Backend) -> Iterator[tuple[TestClient, ServerState]]:
    with serve_app(store_backend) as pair:
        yield pair


def add(client: TestClient, content: str) -> str:
    resp = client.post("/v1/memories", json={"memory": {"content": content}})
    return str(resp.json()["results"][0]["memory"]["id"])


def test_settings_page_has_every_section(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    html = client.get("/").text
    for text in (
        "Contextual search",
        "Deduplication",
        "Ambient awareness",
        "History",
        "Semantic threshold",
        "Re-injection delay",
        "0 = ephemeral",
        "identity",
        "observation",
        "auto_reject",
        str(state.settings.dedup.auto_reject),
    ):
        assert text in html, text


def test_agent_page_badges(api: tuple[TestClient, ServerState]) -> None:
    client, _ = api
    assert "Using default" in client.get("/agents/coder").text
    client.put("/v1/agents/coder/settings/injection", json={"max_total": 4})
    page = client.get("/agents/coder").text
    assert "Override" in page and "Revert to default" in page
    assert 'href="/agents/coder"' in client.get("/").text
    assert client.get("/agents/bad%20name").status_code == 404


def test_memories_page_lists_searches_and_shows_a_memory(
    api: tuple[TestClient, ServerState],
) -> None:
    client, _ = api
    mid = add(client, "The staging database is Postgres 16")
    add(client, "Lunch is at noon")
    assert "Lunch is at noon" in client.get("/memories").text
    found = client.get("/memories", params={"q": "staging Postgres"}).text
    assert "The staging database is Postgres 16" in found and "fts #1" in found
    client.patch(f"/v1/memories/{mid}", json={"content": "The staging database is Postgres 17"})
    page = client.get(f"/memories/{mid}").text
    assert "Postgres 17" in page and "Postgres 16" in page and "Forget" in page
    assert client.get("/memories/nope").status_code == 404
    client.delete(f"/v1/memories/{mid}")
    assert "Postgres 17" not in client.get("/memories").text
    assert "Postgres 17" in client.get("/memories", params={"status": "forgotten"}).text


def test_sessions_page_shows_turn_and_injected(api: tuple[TestClient, ServerState]) -> None:
    client, _ = api
    add(client, "The staging database is Postgres 16")
    client.post("/v1/inject", json={"session": "s1", "text": "staging database Postgres?"})
    page = client.get("/sessions", params={"id": "s1"}).text
    assert "Turn 1" in page and "The staging database is Postgres 16" in page


def test_dedup_log_page_shows_both_texts(api: tuple[TestClient, ServerState]) -> None:
    client, _ = api
    add(client, "The office is in Lyon")
    add(client, "The office is in Lyon")
    page = client.get("/dedup-log").text
    assert "hash_exact" in page and page.count("The office is in Lyon") == 2
    assert "No decision logged" in client.get("/dedup-log", params={"decision": "replaced"}).text


def test_config_error_shows_on_the_pages(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    state.path.write_text("[injection]\nmax_total = 0\n")
    state.check_file()
    assert "was not reloaded" in client.get("/").text


def test_pages_need_the_token(store_backend: Backend) -> None:
    with serve_app(store_backend, **token_settings()) as (client, _):
        page = client.get("/", headers={"accept": "text/html"}, follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login"
        assert "token" in client.get("/login").text
        assert client.get("/", headers=auth(ALICE)).status_code == 404  # settings: no owner's
        client.cookies.set("memlane_token", ALICE)
        assert "owner alice" in client.get("/memories").text
        assert client.get("/memories", params={"owner": "bob"}).status_code == 404
