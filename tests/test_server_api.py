"""The HTTP API through httpx against the app: every /v1 route, and every error class as RFC 9457
problem details (404, 422, 413, 503 with Retry-After, 500 without a traceback)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from conftest import Backend
from memlane.errors import StoreBusy
from memlane.history import INJECTION_BLOCK_PREFIX
from memlane.server.state import ServerState
from server_support import serve_app

PROBLEM = "application/problem+json"


@pytest.fixture
def api(store_backend: Backend) -> Iterator[tuple[TestClient, ServerState]]:
    with serve_app(store_backend) as pair:
        yield pair


@pytest.fixture
def client(api: tuple[TestClient, ServerState]) -> TestClient:
    return api[0]


def add(client: TestClient, content: str, **fields: object) -> dict[str, object]:
    resp = client.post("/v1/memories", json={"memory": {"content": content, **fields}})
    assert resp.status_code == 200, resp.text
    result: dict[str, object] = resp.json()["results"][0]
    return result


def memory_id(result: dict[str, object]) -> str:
    memory = result["memory"]
    assert isinstance(memory, dict)
    return str(memory["id"])


def test_health_is_ready_with_the_model(client: TestClient) -> None:
    resp = client.get("/health")
    assert resp.status_code == 200
    assert resp.json()["status"] == "ready"
    assert resp.json()["model"].startswith("hash")
    assert resp.json()["config_error"] is None


def test_openapi_lists_every_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/memories",
        "/v1/memories/{memory_id}",
        "/v1/memories/{memory_id}/history",
        "/v1/memories/{memory_id}/restore",
        "/v1/memories/{memory_id}/associations",
        "/v1/search",
        "/v1/inject",
        "/v1/sessions/{session_id}",
        "/v1/sessions/{session_id}/reset",
        "/v1/dedup-log",
        "/v1/stats",
        "/v1/settings/injection",
        "/v1/agents/{name}/settings/injection",
    ):
        assert path in paths


def test_docs_are_served_without_a_cdn(client: TestClient) -> None:
    html = client.get("/docs").text
    assert "/docs-static/swagger-ui-bundle.js" in html and "cdn" not in html.lower()
    assert client.get("/docs-static/swagger-ui-bundle.js").status_code == 200


def test_add_one_then_the_same_is_a_duplicate(client: TestClient) -> None:
    first = add(client, "Alice prefers dark mode", type="preference")
    assert first["decision"] == "added" and first["duplicate"] is False
    again = add(client, "Alice prefers dark mode", type="preference")
    assert again["decision"] == "hash_exact" and again["duplicate"] is True
    assert again["matched_id"] == memory_id(first)
    assert again["similarity"] == pytest.approx(1.0)


def test_add_a_batch_returns_each_decision(client: TestClient) -> None:
    body = {"memories": [{"content": "The build uses make"}, {"content": "The build uses make"}]}
    results = client.post("/v1/memories", json=body).json()["results"]
    assert [r["decision"] for r in results] == ["added", "hash_exact"]


@pytest.mark.parametrize(
    ("memory", "words"),
    [
        ({"content": "   "}, "empty"),
        ({"content": f"{INJECTION_BLOCK_PREFIX}\n- a fact"}, "inject"),
        ({"content": "fine text", "type": "rumour"}, "rumour"),
        ({"content": "fine text", "colour": "red"}, "colour"),
        ({"content": 12}, "content"),
    ],
)
def test_invalid_memory_is_422_problem(
    client: TestClient, memory: dict[str, object], words: str
) -> None:
    resp = client.post("/v1/memories", json={"memory": memory})
    assert resp.status_code == 422
    assert resp.headers["content-type"].startswith(PROBLEM)
    assert resp.json()["status"] == 422
    assert words in resp.json()["detail"].lower()
    assert client.get("/v1/memories").json()["items"] == []


def test_oversized_text_is_422(store_backend: Backend) -> None:
    with serve_app(store_backend, dedup={"max_chars": 100}) as (client, _):
        resp = client.post("/v1/memories", json={"memory": {"content": "x" * 101}})
        assert resp.status_code == 422 and "100" in resp.json()["detail"]


def test_body_over_the_limit_is_413(store_backend: Backend) -> None:
    with serve_app(store_backend, server={"max_body_bytes": 2048}) as (client, _):
        resp = client.post("/v1/memories", json={"memory": {"content": "y" * 5000}})
        assert resp.status_code == 413
        assert resp.headers["content-type"].startswith(PROBLEM)
        assert client.get("/v1/memories").json()["items"] == []


def test_malformed_json_is_422_not_500(client: TestClient) -> None:
    resp = client.post(
        "/v1/search", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert resp.status_code == 422


def test_neither_one_nor_batch_is_422(client: TestClient) -> None:
    assert client.post("/v1/memories", json={}).status_code == 422


def test_get_patch_history_forget(client: TestClient) -> None:
    mid = memory_id(add(client, "The deploy target is Fly.io"))
    assert client.get(f"/v1/memories/{mid}").json()["content"] == "The deploy target is Fly.io"
    patched = client.patch(f"/v1/memories/{mid}", json={"content": "The deploy target is AWS"})
    assert patched.status_code == 200 and patched.json()["content"] == "The deploy target is AWS"
    history = client.get(f"/v1/memories/{mid}/history").json()
    assert [v["content"] for v in history] == ["The deploy target is Fly.io"]
    assert client.get(f"/v1/memories/{mid}/associations").json() == []
    forgotten = client.delete(f"/v1/memories/{mid}")
    assert forgotten.json()["status"] == "forgotten"
    gone = client.get(f"/v1/memories/{mid}")
    assert gone.status_code == 404 and gone.headers["content-type"].startswith(PROBLEM)
    assert gone.json()["title"] == "NotFound"


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("get", ""), ("delete", ""), ("get", "/history"), ("get", "/associations")],
)
def test_unknown_id_is_404(client: TestClient, method: str, suffix: str) -> None:
    resp = client.request(method, f"/v1/memories/no-such-id{suffix}")
    assert resp.status_code == 404
    assert "no-such-id" in resp.json()["detail"]


def test_patch_unknown_id_is_404(client: TestClient) -> None:
    assert client.patch("/v1/memories/nope", json={"content": "x y z"}).status_code == 404


def test_list_pages_with_a_cursor_and_filters(client: TestClient) -> None:
    for i in range(5):
        add(client, f"fact number {i} about the garden", type="fact")
    add(client, "ship the release on friday", type="todo")
    first = client.get("/v1/memories", params={"limit": 4}).json()
    assert len(first["items"]) == 4 and first["next_cursor"]
    rest = client.get("/v1/memories", params={"limit": 4, "cursor": first["next_cursor"]}).json()
    assert len(rest["items"]) == 2 and rest["next_cursor"] is None
    ids = [m["id"] for m in first["items"] + rest["items"]]
    assert len(set(ids)) == 6
    todos = client.get("/v1/memories", params={"type": "todo"}).json()["items"]
    assert [m["content"] for m in todos] == ["ship the release on friday"]
    assert client.get("/v1/memories", params={"type": "rumour"}).status_code == 422
    assert client.get("/v1/memories", params={"cursor": "abc"}).status_code == 422
    assert client.get("/v1/memories", params={"limit": 0}).status_code == 422
    assert client.get("/v1/memories", params={"status": "gone"}).status_code == 422
    client.delete(f"/v1/memories/{todos[0]['id']}")
    forgotten = client.get("/v1/memories", params={"status": "forgotten"}).json()["items"]
    assert [m["content"] for m in forgotten] == ["ship the release on friday"]


def test_search_finds_with_ranks(client: TestClient) -> None:
    add(client, "The staging database is Postgres 16")
    add(client, "Lunch is at noon")
    resp = client.post("/v1/search", json={"query": "staging database Postgres"})
    hits = resp.json()["hits"]
    assert hits[0]["memory"]["content"] == "The staging database is Postgres 16"
    assert "fts" in hits[0]["ranks"]
    assert client.post("/v1/search", json={"query": "x", "mode": "psychic"}).status_code == 422
    assert client.post("/v1/search", json={"query": ""}).status_code == 422


def test_inject_then_session_then_reset(client: TestClient) -> None:
    add(client, "The staging database is Postgres 16")
    body = {"session": "s1", "text": "which staging database do we use on Postgres?"}
    first = client.post("/v1/inject", json=body).json()
    assert first["turn"] == 1
    assert "Postgres 16" in (first["block"] or "")
    assert first["items"][0]["score"] > 0
    second = client.post("/v1/inject", json=body).json()
    assert second["block"] is None and second["skipped"].get("already_injected", 0) >= 1
    state = client.get("/v1/sessions/s1").json()
    assert state["turn"] == 2 and len(state["injected"]) == 1
    reset = client.post("/v1/sessions/s1/reset", json={"reason": "compact"}).json()
    assert reset["last_reset_reason"] == "compact" and reset["injected"] == {}
    again = client.post("/v1/inject", json=body).json()
    assert "Postgres 16" in (again["block"] or "")
    bad = client.post("/v1/sessions/s1/reset", json={"reason": "boredom"})
    assert bad.status_code == 422 and "reason" in bad.json()["detail"]
    assert client.post("/v1/inject", json={"session": "s1", "text": " "}).status_code == 422


def test_dedup_log_lists_decisions(client: TestClient) -> None:
    add(client, "The office is in Lyon")
    add(client, "The office is in Lyon")
    log = client.get("/v1/dedup-log").json()
    assert [e["decision"] for e in log["items"]] == ["hash_exact"]
    assert log["items"][0]["existing_text"] == "The office is in Lyon"
    filtered = client.get("/v1/dedup-log", params={"decision": "replaced"}).json()
    assert filtered["items"] == []
    assert client.get("/v1/dedup-log", params={"decision": "maybe"}).status_code == 422


def test_stats_counts(client: TestClient) -> None:
    add(client, "one fact here")
    mid = memory_id(add(client, "a goal to reach", type="goal"))
    client.delete(f"/v1/memories/{mid}")
    stats = client.get("/v1/stats").json()
    assert stats["memories_by_owner"] == {"default": 1}
    assert stats["memories_by_type"] == {"fact": 1}
    assert stats["memories_by_status"] == {"active": 1, "forgotten": 1}
    assert stats["store_bytes"] > 0 and stats["uptime_s"] >= 0


def test_store_busy_is_503_with_retry_after(
    api: tuple[TestClient, ServerState], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, state = api

    def busy(*args: object, **kwargs: object) -> None:
        raise StoreBusy("the store's write lock was held past busy_timeout_ms")

    monkeypatch.setattr(state.engine, "add_many", busy)
    resp = client.post("/v1/memories", json={"memory": {"content": "anything at all"}})
    assert resp.status_code == 503
    assert resp.headers["retry-after"] == "1"
    assert resp.json()["title"] == "StoreBusy"


def test_a_bug_is_500_problem_without_traceback(
    api: tuple[TestClient, ServerState], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, state = api

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(state.engine, "search", crash)
    resp = client.post("/v1/search", json={"query": "anything"})
    assert resp.status_code == 500
    assert resp.headers["content-type"].startswith(PROBLEM)
    assert "Traceback" not in resp.text and "secret internals" not in resp.text


def test_unknown_route_is_404_problem(client: TestClient) -> None:
    resp = client.get("/v1/nothing-here")
    assert resp.status_code == 404 and resp.headers["content-type"].startswith(PROBLEM)


def test_a_memory_over_http_has_every_field_of_the_python_value(client: TestClient) -> None:
    """The API serialises memlane's own dataclasses: a field added to ``Memory`` (``valid_to``,
    say) reaches HTTP clients without a second declaration that could drift."""
    from memlane.types import Memory

    result = add(client, "Bob lives in Paris")
    http_fields = set(result["memory"])  # type: ignore[arg-type]
    assert http_fields == {f for f in Memory.__dataclass_fields__}
    got = client.get(f"/v1/memories/{memory_id(result)}").json()
    assert got["valid_to"] is None and got["content"] == "Bob lives in Paris"
