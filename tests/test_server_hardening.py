"""Issue #24's defects, each reproduced: a poisoned owner (metadata limits), 500s on bad input
and the keep-alive connection they killed, cross-site writes, the token cookie, the Host
header, ``/health`` echoing config values, untyped settings writes, revoked owner tokens."""

from __future__ import annotations

import html
import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from conftest import Backend
from memlane.cli import app as cli_app
from memlane.config import Settings
from memlane.dedup.limits import METADATA_MAX_BYTES, METADATA_MAX_DEPTH, METADATA_MAX_KEYS
from memlane.errors import ConfigError
from server_support import ADMIN, ALICE, auth, run_server, serve_app, token_settings

PROBLEM = "application/problem+json"


@pytest.fixture
def client(store_backend: Backend) -> Iterator[TestClient]:
    with serve_app(store_backend) as (client, _):
        yield client


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def is_problem(resp: Any, status: int) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith(PROBLEM)
    assert resp.json()["status"] == status and resp.json()["detail"]


@pytest.mark.parametrize(
    "metadata, named",
    [
        (nested(256), "deep"),
        (nested(METADATA_MAX_DEPTH + 1), "deep"),
        ({f"k{n}": n for n in range(METADATA_MAX_KEYS + 1)}, "keys"),
        ({"blob": "x" * METADATA_MAX_BYTES}, "bytes"),
        ({"k" * 300: 1}, "key"),
    ],
)
def test_metadata_over_a_limit_is_422_and_nothing_is_written(
    client: TestClient, metadata: dict[str, Any], named: str
) -> None:
    resp = client.post("/v1/memories", json={"memory": {"content": "poison", "metadata": metadata}})
    is_problem(resp, 422)
    assert named in resp.json()["detail"] and "metadata" in resp.json()["detail"]
    assert client.get("/v1/memories").json()["items"] == []
    assert client.get("/v1/dedup-log").json()["items"] == []
    assert client.post("/v1/search", json={"query": "poison"}).json()["hits"] == []


def worst_metadata() -> dict[str, Any]:
    """The largest metadata allowed: the deepest nesting, the most keys, near the byte limit,
    with quotes, markup, non-BMP characters and the numbers JSON can hold."""
    out: dict[str, Any] = {"deep": nested(METADATA_MAX_DEPTH - 1)}
    for n in range(METADATA_MAX_KEYS - METADATA_MAX_DEPTH - 8):
        out[f"k{n}"] = n
    out.update(
        big=2**63 - 1,
        small=-(2**63),
        float=-1.25e-7,
        markup="<script>alert(1)</script>\"'&",
        emoji="\U0001f600 \u2028 \t",
        list=[None, True, 0.0, "x"],
    )
    used = len(json.dumps(out, ensure_ascii=False).encode())
    out["pad"] = "p" * (METADATA_MAX_BYTES - used - 64)
    return out


def test_the_worst_allowed_memory_reads_back_through_every_route(client: TestClient) -> None:
    metadata = worst_metadata()
    resp = client.post(
        "/v1/memories", json={"memory": {"content": "worst case memory", "metadata": metadata}}
    )
    assert resp.status_code == 200, resp.text
    mid = resp.json()["results"][0]["memory"]["id"]
    assert resp.json()["results"][0]["memory"]["metadata"] == metadata
    client.patch(f"/v1/memories/{mid}", json={"content": "worst case memory, changed"})
    for path in (
        "/v1/memories",
        f"/v1/memories/{mid}",
        f"/v1/memories/{mid}/history",
        f"/v1/memories/{mid}/associations",
        "/v1/dedup-log",
        "/v1/stats",
        "/memories",
        f"/memories/{mid}",
        "/dedup-log",
    ):
        assert client.get(path).status_code == 200, path
    assert client.get(f"/v1/memories/{mid}").json()["metadata"] == metadata
    hits = client.post("/v1/search", json={"query": "worst case"}).json()["hits"]
    assert hits[0]["memory"]["metadata"] == metadata
    inject = client.post("/v1/inject", json={"session": "s", "text": "the worst case memory?"})
    assert inject.status_code == 200 and "worst case" in inject.json()["block"]
    assert client.get("/sessions", params={"id": "s"}).status_code == 200
    assert client.delete(f"/v1/memories/{mid}").status_code == 200
    forgotten = client.get("/v1/memories", params={"status": "forgotten"})
    assert forgotten.status_code == 200 and forgotten.json()["items"][0]["metadata"] == metadata


SURROGATE = '"\\ud800"'  # JSON text of a lone UTF-16 surrogate (not a character)

#: (method, path, raw JSON body): each held a lone surrogate and answered 500 (issue #24).
SURROGATE_BODIES = [
    ("POST", "/v1/memories", f'{{"memory": {{"content": {SURROGATE}}}}}'),
    ("POST", "/v1/memories", f'{{"owner": {SURROGATE}, "memory": {{"content": "x"}}}}'),
    ("POST", "/v1/memories", f'{{"memory": {{"content": "x", "session": {SURROGATE}}}}}'),
    ("POST", "/v1/memories", f'{{"memory": {{"content": "x", "metadata": {{"k": {SURROGATE}}}}}}}'),
    ("POST", "/v1/memories", f'{{"memory": {{"content": "x", "metadata": {{{SURROGATE}: 1}}}}}}'),
    ("POST", "/v1/search", f'{{"query": {SURROGATE}}}'),
    ("POST", "/v1/inject", f'{{"session": "s", "text": {SURROGATE}}}'),
    ("POST", "/v1/inject", f'{{"session": {SURROGATE}, "text": "hello there"}}'),
    ("PATCH", "/v1/memories/x", f'{{"content": {SURROGATE}}}'),
]

#: Other bad inputs: (method, path, raw body or None, headers, expected status).
BAD_INPUTS: list[tuple[str, str, str | None, dict[str, str], int]] = [
    ("POST", "/v1/dedup-log/9223372036854775808/confirm", None, {}, 422),
    ("POST", "/v1/dedup-log/-1/reverse", None, {}, 422),
    ("PUT", "/v1/settings/injection", '{"pinned_types": ["fact", null]}', {}, 422),
    ("PUT", "/v1/settings/injection", '{"max_total": true}', {}, 422),
    ("PUT", "/v1/settings/injection", '{"enabled": "yes"}', {}, 422),
    ("PUT", "/v1/settings/injection", '{"max_tokens": 1e400}', {}, 422),
    ("PUT", "/v1/settings/injection", '{"max_tokens": ' + str(10**30) + "}", {}, 422),
    ("POST", "/v1/memories", '{"memory": ', {}, 422),
    ("POST", "/v1/memories", "[" * 50_000, {}, 422),
    ("POST", "/v1/memories", '{"memories": [null]}', {}, 422),
    ("POST", "/v1/memories", '{"memory": {"content": "x", "importance": 1e400}}', {}, 422),
    ("POST", "/v1/search", '{"query": "x", "types": ["fact", null]}', {}, 422),
    (
        "POST",
        "/v1/inject",
        '{"session": "s", "text": "x", "max_chars": ' + str(10**30) + "}",
        {},
        422,
    ),
    ("GET", "/v1/memories?limit=99999999999999999999999", None, {}, 422),
    ("PUT", "/v1/memories", "{}", {}, 405),
]


def test_bad_inputs_are_4xx_problems_on_a_connection_that_stays_usable(
    store_backend: Backend,
) -> None:
    """Through the real ``memlane serve``: each bad request is answered 4xx problem+json and the
    same keep-alive connection then serves a good request (after a 500 uvicorn dropped it)."""
    cases = [(m, p, b, {}, 422) for m, p, b in SURROGATE_BODIES] + BAD_INPUTS
    with run_server(store_backend) as served:
        host, port = served.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            answers = ask_all(conn, cases)
        finally:
            conn.close()
        print("bad inputs and their answers:", *answers, sep="\n  ")
        assert "Traceback" not in served.log.read_text()
        # the surrogate never reached the store
        listed = json.loads(http_get(served.url, "/v1/memories"))["items"]
        assert listed == []


def ask_all(
    conn: http.client.HTTPConnection, cases: list[tuple[str, str, str | None, dict[str, str], int]]
) -> list[tuple[str, str, int]]:
    """Send each bad request on ``conn``, then a good one: the same socket must answer both."""
    conn.request("GET", "/health")
    conn.getresponse().read()
    sock = conn.sock
    answers = []
    for method, path, body, headers, status in cases:
        hdrs = {"Content-Type": "application/json", **headers}
        conn.request(method, path, body=body.encode() if body else None, headers=hdrs)
        resp = conn.getresponse()
        text = resp.read()
        answers.append((method, path, resp.status))
        assert resp.status == status, (method, path, body and body[:80], text[:300])
        assert (resp.getheader("content-type") or "").startswith(PROBLEM), path
        assert json.loads(text)["detail"]
        assert (resp.getheader("connection") or "").lower() != "close", path
        conn.request("GET", "/v1/stats")
        good = conn.getresponse()
        good.read()
        assert good.status == 200 and conn.sock is sock, f"connection dropped after {path}"
    return answers


def http_get(url: str, path: str) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", path)
    body = conn.getresponse().read()
    conn.close()
    return body


def test_a_chunked_body_over_the_limit_is_413(store_backend: Backend) -> None:
    with serve_app(store_backend, server={"max_body_bytes": 2048}) as (client, _):

        def chunks() -> Iterator[bytes]:
            yield b'{"memory": {"content": "'
            for _ in range(10):
                yield b"x" * 1000
            yield b'"}}'

        resp = client.post(
            "/v1/memories", content=chunks(), headers={"Content-Type": "application/json"}
        )
        is_problem(resp, 413)
        assert client.get("/v1/memories").json()["items"] == []


def test_options_answers_the_allowed_methods(client: TestClient) -> None:
    resp = client.options("/v1/memories/abc")
    assert resp.status_code == 204
    assert set(resp.headers["allow"].split(", ")) == {"GET", "PATCH", "DELETE", "OPTIONS", "HEAD"}
    wrong = client.put("/v1/memories/abc", json={})
    is_problem(wrong, 405)
    assert set(wrong.headers["allow"].split(", ")) == {"GET", "PATCH", "DELETE", "OPTIONS", "HEAD"}
    is_problem(client.options("/v1/nothing-here"), 404)


# ---------------------------------------------------------------------- cross-site requests
@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://localhost:18900"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "cross-site"},
    ],
)
def test_a_cross_site_write_is_refused(client: TestClient, headers: dict[str, str]) -> None:
    added = client.post("/v1/memories", json={"memory": {"content": "the port is 8080"}})
    client.post("/v1/memories", json={"memory": {"content": "the port is 8080"}})
    entry = client.get("/v1/dedup-log").json()["items"][0]["id"]
    before = client.get("/v1/dedup-log").json()["items"]
    for method, path in [
        ("POST", f"/v1/dedup-log/{entry}/reverse"),
        ("POST", f"/v1/dedup-log/{entry}/confirm"),
        ("POST", "/v1/dedup-log/review-llm"),
        ("DELETE", f"/v1/memories/{added.json()['results'][0]['memory']['id']}"),
    ]:
        resp = client.request(method, path, headers=headers)
        is_problem(resp, 403)
        assert "cross-site" in resp.json()["detail"]
    form = client.post(
        "/v1/memories",
        content=b"content=x",
        headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    is_problem(form, 403)
    assert client.get("/v1/dedup-log").json()["items"] == before
    assert len(client.get("/v1/memories").json()["items"]) == 1
    # the same-origin page (and a client that sends neither header) may write
    same = client.delete(
        f"/v1/memories/{added.json()['results'][0]['memory']['id']}",
        headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
    )
    assert same.status_code == 200


def test_the_api_takes_no_cookie_from_another_site(store_backend: Backend) -> None:
    with serve_app(store_backend, **token_settings()) as (client, _):
        client.cookies.set("memlane_token", ADMIN)
        resp = client.post("/v1/dedup-log/review-llm", headers={"Sec-Fetch-Site": "same-site"})
        assert resp.status_code == 403
        # a cookie is a page's credential: a script-less cross-site GET of the API is refused
        got = client.get("/v1/memories", headers={"Sec-Fetch-Site": "cross-site"})
        is_problem(got, 401)


# ---------------------------------------------------------------------- the session cookie
@pytest.mark.parametrize("token", [ADMIN, "a+b/c=d==", "t%20ok"])
def test_the_server_sets_an_httponly_strict_cookie(store_backend: Backend, token: str) -> None:
    with serve_app(store_backend, server={"token": token}) as (client, _):
        bad = client.post("/login", data={"token": "wrong"}, follow_redirects=False)
        assert bad.status_code == 401 and "not valid" in bad.text
        assert "set-cookie" not in bad.headers
        resp = client.post("/login", data={"token": token}, follow_redirects=False)
        assert resp.status_code == 303 and resp.headers["location"] == "/"
        cookie = resp.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        assert client.get("/memories").status_code == 200  # the cookie signs the pages in
        assert client.get("/v1/memories").status_code == 200  # and the same-origin API


def test_the_login_page_needs_no_script_for_the_cookie(store_backend: Backend) -> None:
    with serve_app(store_backend, server={"token": ADMIN}) as (client, _):
        page = client.get("/login").text
        assert 'method="post"' in page and 'name="token"' in page
        js = client.get("/static/memlane.js").text
        assert "document.cookie" not in js


# ---------------------------------------------------------------------- Host allowlist
@pytest.mark.parametrize("host", ["rebind.attacker.example", "evil.localhost.example:8765"])
def test_an_unknown_host_is_refused(client: TestClient, host: str) -> None:
    for method, path, body in [
        ("GET", "/v1/memories", None),
        ("PUT", "/v1/settings/injection", {"enabled": False}),
        ("GET", "/", None),
    ]:
        resp = client.request(method, path, json=body, headers={"Host": host})
        is_problem(resp, 421)
        assert "allowed_hosts" in resp.json()["detail"]
    assert client.get("/v1/settings/injection").json()["settings"]["enabled"] is True


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8765", "[::1]:8765", "LOCALHOST"])
def test_loopback_hosts_are_allowed(client: TestClient, host: str) -> None:
    assert client.get("/v1/stats", headers={"Host": host}).status_code == 200


def test_allowed_hosts_are_configurable(store_backend: Backend) -> None:
    with serve_app(store_backend, server={"allowed_hosts": ["memlane.lan"]}) as (client, _):
        assert client.get("/v1/stats", headers={"Host": "memlane.lan:8765"}).status_code == 200
        assert client.get("/v1/stats", headers={"Host": "other.lan"}).status_code == 421


# ---------------------------------------------------------------------- /health, messages
def test_health_says_config_error_without_values_unless_authenticated(
    store_backend: Backend,
) -> None:
    with serve_app(store_backend, **token_settings()) as (client, state):
        (state.home / "memlane.toml").write_text('[sever]\ntoken = "admin-SECRET"\n')
        assert state.reload() is False
        open_health = client.get("/health")
        assert open_health.status_code == 200
        assert "SECRET" not in open_health.text and "sever" not in open_health.text
        assert open_health.json()["config_error"] == "memlane.toml has an error"
        assert "model" not in open_health.json()
        full = client.get("/health", headers=auth(ADMIN)).json()
        assert "sever" in full["config_error"] and "SECRET" not in full["config_error"]
        page = client.get("/", headers=auth(ADMIN)).text
        assert "SECRET" not in page
        assert "SECRET" not in client.get("/health", headers=auth(ALICE)).text


def test_no_message_repeats_a_token(store_backend: Backend) -> None:
    with serve_app(store_backend, **token_settings()) as (client, _):
        for token in ("admin-tokeX", ADMIN + "x", "secret value"):
            resp = client.get("/v1/memories", headers=auth(token))
            assert resp.status_code == 401 and token not in resp.text


# ---------------------------------------------------------------------- settings, tokens
def test_settings_writes_are_typed(store_backend: Backend) -> None:
    with serve_app(store_backend) as (client, state):
        for body in ({"max_total": True}, {"enabled": "yes"}, {"pinned_types": ["fact", None]}):
            is_problem(client.put("/v1/settings/injection", json=body), 422)
        assert state.file_text() == ""
        ok = client.put("/v1/settings/injection", json={"max_total": 7, "enabled": False})
        assert ok.status_code == 200
        assert "max_total = 7" in state.file_text() and "enabled = false" in state.file_text()


def test_owner_tokens_removed_on_reload_are_revoked(store_backend: Backend) -> None:
    home = store_backend.home
    home.mkdir(parents=True, exist_ok=True)
    (home / "memlane.toml").write_text(
        '[server]\ntoken = "admin-token"\n[server.owner_tokens]\nalice = "alice-token"\n'
        'bob = "bob-token"\n'
    )
    with serve_app(store_backend) as (client, state):
        assert client.get("/v1/memories", headers=auth(ALICE)).status_code == 200
        (home / "memlane.toml").write_text(
            '[server]\ntoken = "admin-token"\n[server.owner_tokens]\nbob = "bob-token"\n'
        )
        assert state.reload() is True
        assert client.get("/v1/memories", headers=auth(ALICE)).status_code == 401
        assert client.get("/v1/memories", headers=auth("bob-token")).status_code == 200
        assert client.get("/v1/memories", headers=auth(ADMIN)).status_code == 200


def test_a_blank_token_cannot_leave_loopback(
    store_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_SERVER__TOKEN", " ")
    result = CliRunner().invoke(
        cli_app, ["serve", "--home", str(store_backend.home), "--host", "0.0.0.0"]
    )
    assert result.exit_code == 5
    assert "needs a token" in result.output


def test_page_links_encode_the_owner(client: TestClient) -> None:
    owner = "r&d+ops #1"
    added = client.post(
        "/v1/memories", json={"owner": owner, "memory": {"content": "the lab opens at nine"}}
    )
    mid = added.json()["results"][0]["memory"]["id"]
    page = client.get("/memories", params={"owner": owner}).text
    links = re.findall(r'href="(/memories/[^"]+)"', page)
    assert links, page
    link = html.unescape(links[0])
    assert link == f"/memories/{mid}?owner=r%26d%2Bops%20%231"
    shown = client.get(link)
    assert shown.status_code == 200 and "the lab opens at nine" in shown.text


@pytest.mark.parametrize(
    "text", ['[sever]\ntoken = "admin-SECRET"\n', '[server]\ntoken = ["admin-SECRET"]\n']
)
def test_a_config_error_never_quotes_a_token(tmp_path: Path, text: str) -> None:
    (tmp_path / "memlane.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        Settings.load(tmp_path)
    assert "SECRET" not in str(caught.value) and "<hidden>" in str(caught.value)
