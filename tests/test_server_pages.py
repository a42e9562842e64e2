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
    html = client.get("/settings").text
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
    assert 'href="/agents/coder"' in client.get("/settings").text
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
        assert client.get("/settings", headers=auth(ALICE)).status_code == 404  # not an owner's
        assert "alice" in client.get("/", headers=auth(ALICE)).text  # the overview is
        client.cookies.set("memlane_token", ALICE)
        assert "owner alice" in client.get("/memories").text
        assert client.get("/memories", params={"owner": "bob"}).status_code == 404


HTML = {"accept": "text/html"}


def seed(client: TestClient) -> None:
    """Two owners, an agent, a duplicate, a forgotten memory and two sessions."""
    for owner, agent, content in (
        ("alice", None, "Alice works at Acme"),
        ("alice", "coder", "Alice prefers dark mode"),
        ("alice", None, "Alice works at Acme"),
        ("bob", None, "Bob lives in Lyon"),
    ):
        client.post(
            "/v1/memories", json={"memory": {"content": content, "agent": agent}, "owner": owner}
        )
    for session in ("chat-1", "chat-2"):
        client.post(
            "/v1/inject",
            json={"session": session, "text": "where does Alice work?", "owner": "alice"},
        )


def test_overview_shows_owners_agents_counts_and_links(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    seed(client)
    # no owner asked: the owner rule's ([scope] owner, else "default"), as in every door;
    # every owner is listed with its counts
    first = client.get("/").text
    assert '<option value="default" selected' in first and '<option value="alice"' in first
    assert 'href="/memories?owner=bob">1</a>' in first
    page = client.get("/", params={"owner": "alice"}).text
    assert 'id="pick-owner"' in page and '<option value="bob"' in page
    assert '<option value="alice" selected' in page and '<option value="coder"' in page
    assert 'href="/memories?owner=alice&amp;type=fact">fact 2</a>' in page
    assert 'href="/memories?owner=alice&amp;agent=coder">coder 1</a>' in page
    assert 'href="/memories?owner=bob">1</a>' in page
    assert "hash_exact 1" in page  # decisions per day, a link to the log
    assert 'href="/sessions/chat-2?owner=alice">chat-2</a>' in page
    assert state.engine.embedder.name in page
    assert state.engine.settings.store.backend in page
    bob = client.get("/", params={"owner": "bob"}).text
    assert '<option value="bob" selected' in bob and "No session yet for bob" in bob


def test_lists_count_sort_and_page(api: tuple[TestClient, ServerState]) -> None:
    client, _ = api
    client.post(
        "/v1/memories",
        json={
            "memories": [{"content": f"Fact number {i:02d} about the project"} for i in range(60)]
        },
    )
    page = client.get("/memories", params={"owner": "default"}).text
    assert "60 active memories" in page and "page 1 of 2" in page
    assert "Fact number 59" in page and "Fact number 00" not in page  # newest first
    second = client.get("/memories", params={"owner": "default", "page": 2}).text
    assert "Fact number 00" in second and "page 2 of 2" in second
    by_text = client.get("/memories", params={"owner": "default", "sort": "text"}).text
    assert by_text.index("Fact number 00") < by_text.index("Fact number 01")


def test_sessions_listed_recent_first_with_turns_and_skip_reasons(
    api: tuple[TestClient, ServerState],
) -> None:
    client, _ = api
    seed(client)
    client.post(
        "/v1/inject", json={"session": "chat-1", "text": "where does Alice work?", "owner": "alice"}
    )
    listing = client.get("/sessions", params={"owner": "alice"}).text
    assert listing.index(">chat-1<") < listing.index(">chat-2<")  # chat-1 used last
    page = client.get("/sessions/chat-1", params={"owner": "alice"}).text
    assert 'id="turn-1"' in page and 'id="turn-2"' in page
    assert "Alice works at Acme" in page
    assert "shown within the last turns (re-injection delay)" in page  # turn 2, in words
    assert "(already_injected)" in page


def test_unknown_session_and_page_answer_an_html_404(api: tuple[TestClient, ServerState]) -> None:
    client, _ = api
    gone = client.get("/sessions/never-seen", params={"owner": "alice"}, headers=HTML)
    assert gone.status_code == 404 and "text/html" in gone.headers["content-type"]
    assert "no session &#39;never-seen&#39;" in gone.text and 'href="/"' in gone.text
    page = client.get("/no/such/page", headers=HTML)
    assert page.status_code == 404 and "No page at /no/such/page" in page.text
    assert client.get("/v1/no-such-route").headers["content-type"].startswith("application/")
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


def test_memory_page_associations_as_texts_and_restore(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    a = add(client, "The staging database is Postgres 16")
    b = add(client, "The production database is Postgres 15")
    with state.engine.store.transaction():
        state.engine.store.add_association("default", a, b, "related_to", 0.5)
    page = client.get(f"/memories/{a}").text
    assert "The production database is Postgres 15" in page and f">{b}<" not in page
    assert "session / source" not in page and "not given" in page
    assert ".000000" not in page and "<time datetime=" in page  # no microseconds
    client.delete(f"/v1/memories/{a}")
    assert client.post(f"/v1/memories/{a}/restore").status_code == 200
    assert "The staging database" in client.get("/memories").text
    assert client.post(f"/v1/memories/{a}/restore").status_code == 404  # not forgotten now


def test_dedup_log_in_words_with_changed_words_marked(api: tuple[TestClient, ServerState]) -> None:
    client, _ = api
    add(client, "The weekly sync is at 3pm on Tuesdays")
    add(client, "The weekly sync is at 4pm on Tuesdays")
    page = client.get("/dedup-log").text
    assert "<del>3pm</del>" in page and "<ins>4pm</ins>" in page
    assert "the near-identical guard saw a different fact" in page or "stored apart" in page


def test_docs_render_openapi_31_from_a_bundled_swagger_ui_5(
    api: tuple[TestClient, ServerState],
) -> None:
    client, _ = api
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    html = client.get("/docs").text
    assert "/docs-static/swagger-ui-bundle.js" in html and "cdn" not in html.lower()
    bundle = client.get("/docs-static/swagger-ui-bundle.js")
    assert bundle.status_code == 200 and '"5.' in bundle.text[:2_000_000]
