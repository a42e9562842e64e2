"""HTTP errors a newcomer meets first (issue 38): each names the field, the problem and the fix
in one line. A malformed JSON body, a body without a content type, a lone surrogate, a control
character. Runs the real app (FastAPI TestClient) over a hash-embedder engine."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from conftest import Backend
from server_support import serve_app


@pytest.fixture
def client(sqlite_backend: Backend) -> Iterator[TestClient]:
    with serve_app(sqlite_backend) as (client, _):
        yield client


def problem(resp: httpx.Response) -> tuple[str, list[dict[str, str]]]:
    assert resp.status_code == 422, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    body = resp.json()
    assert "\n" not in body["detail"]
    return body["detail"], body.get("errors", [])


def test_malformed_json_names_the_body_and_where_it_broke(client: TestClient) -> None:
    raw = b'{"owner": "alice", "memory": {"content": "x",}}'
    at = raw.index(b",}") + 1  # where the JSON parser gives up
    detail, errors = problem(
        client.post("/v1/memories", content=raw, headers={"Content-Type": "application/json"})
    )
    assert [e["field"] for e in errors] == ["body"], errors
    assert detail.startswith("body: is not valid JSON"), detail
    assert f"at character {at}" in detail and "send one JSON object" in detail, detail
    assert "JSON decode error" not in detail, detail


def test_a_body_without_a_content_type_says_json_is_expected(client: TestClient) -> None:
    raw = b'{"owner": "alice", "memory": {"content": "Alice likes tea"}}'
    detail, errors = problem(client.post("/v1/memories", content=raw))
    assert [e["field"] for e in errors] == ["body"], errors
    assert "was not read as JSON (no Content-Type)" in detail, detail
    assert "Content-Type: application/json" in detail, detail
    assert "valid dictionary" not in detail, detail
    text = client.post("/v1/memories", content=raw, headers={"Content-Type": "text/plain"})
    assert "(Content-Type: text/plain)" in problem(text)[0]


def test_a_lone_surrogate_names_its_field_without_pydantics_prefix(client: TestClient) -> None:
    raw = b'{"owner": "alice", "memory": {"content": "Alice \\ud800 likes tea"}}'
    detail, errors = problem(
        client.post("/v1/memories", content=raw, headers={"Content-Type": "application/json"})
    )
    assert errors == [
        {
            "field": "memory.content",
            "message": "holds a lone UTF-16 surrogate at character 6: send valid UTF-8 text "
            "without NUL",
        }
    ], errors
    assert "Value error" not in detail and detail.startswith("memory.content: holds"), detail


def test_a_control_character_is_refused_as_on_the_command_line(client: TestClient) -> None:
    resp = client.post(
        "/v1/memories", json={"owner": "alice", "memory": {"content": "Alice \x01 likes tea"}}
    )
    detail, _ = problem(resp)
    assert detail == (
        "content holds a control character (U+0001 at character 6): remove it (tabs and line "
        "breaks are fine)"
    ), detail
    listed = client.get("/v1/memories", params={"owner": "alice"})
    assert listed.status_code == 200 and listed.json()["items"] == [], listed.text
