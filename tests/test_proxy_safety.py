"""The proxy's safety promises (issue #36 item 5, docs/proxy.md): refusals forward nothing, the
client's API key reaches the upstream and nothing else (logs, store files, errors), upstream
errors arrive unchanged, a memlane failure still forwards, SSE passes event by event with its
bytes unchanged, and a client that goes away cancels the upstream request."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from conftest import Backend
from memlane import MemoryEngine, StoreError, Turn
from memlane.eval.bench.proxy_upstream import Upstream
from proxy_support import ANTHROPIC_KEY, OPENAI_KEY, facts_in, fake_upstream, proxy_for
from test_turn import FACTS, QUESTIONS


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Upstream, str]]:
    with fake_upstream() as pair:
        yield pair


@pytest.fixture
def fake(upstream: tuple[Upstream, str]) -> Upstream:
    upstream[0].reset()
    return upstream[0]


@pytest.fixture
def filled(sqlite_backend: object, engine: MemoryEngine) -> MemoryEngine:
    for fact in FACTS:
        engine.add(fact)
    return engine


@pytest.fixture
def proxy(filled: MemoryEngine, upstream: tuple[Upstream, str]) -> Iterator[str]:
    with proxy_for(filled, upstream[1], max_body_bytes=4096) as (url, _):
        yield url


CHAT = {"model": "m", "messages": [{"role": "user", "content": QUESTIONS[0]}]}
KEYS = {"authorization": f"Bearer {OPENAI_KEY}", "x-api-key": ANTHROPIC_KEY}


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/elsewhere/v1/chat/completions", 404, "no upstream named 'elsewhere'"),
        ("/openai/v1/files", 404, "not a path of the openai API"),
        ("/anthropic/v1/chat/completions", 404, "not a path of the anthropic API"),
        ("/openai/v2/chat/completions", 404, "not a path"),
        ("/openai/v1/models/%2e%2e", 404, "not a path"),  # no way out of the upstream's base
        ("/openai/v1/models", 405, "POST is not allowed"),
    ],
)
def test_refusals_are_clear_and_forward_nothing(
    proxy: str, fake: Upstream, path: str, status: int, says: str
) -> None:
    resp = httpx.post(proxy + path, json=CHAT, headers=KEYS)
    assert resp.status_code == status
    assert resp.json()["error"]["type"] == "memlane_proxy_error"
    assert says in resp.json()["error"]["message"]
    assert OPENAI_KEY not in resp.text and ANTHROPIC_KEY not in resp.text
    assert fake.seen == []


def test_a_body_over_the_limit_is_refused(proxy: str, fake: Upstream) -> None:
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]}
    resp = httpx.post(proxy + "/openai/v1/chat/completions", json=big, headers=KEYS)
    assert resp.status_code == 413 and "max_body_bytes = 4096" in resp.text
    # also when the client does not say its length (chunked)
    chunks = iter([b'{"model":"m","messages":[{"role":"user","content":"', b"y" * 5000, b'"}]}'])
    resp = httpx.post(proxy + "/openai/v1/chat/completions", content=chunks, headers=KEYS)
    assert resp.status_code == 413
    assert fake.seen == []


def test_a_token_guards_the_proxy(filled: MemoryEngine, upstream: tuple[Upstream, str]) -> None:
    upstream[0].reset()
    with proxy_for(filled, upstream[1], token="memlane-secret") as (url, _):
        resp = httpx.post(url + "/openai/v1/chat/completions", json=CHAT, headers=KEYS)
        assert resp.status_code == 401 and "x-memlane-token" in resp.text
        assert upstream[0].seen == []
        ok = httpx.post(
            url + "/openai/v1/chat/completions",
            json=CHAT,
            headers={**KEYS, "x-memlane-token": "memlane-secret"},
        )
        assert ok.status_code == 200
        assert "x-memlane-token" not in upstream[0].seen[-1].headers  # memlane's, not upstream's


def test_the_api_key_reaches_the_upstream_and_nothing_else(
    proxy: str, fake: Upstream, filled: MemoryEngine, caplog: pytest.LogCaptureFixture,
    store_backend: Backend,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    client = openai.OpenAI(base_url=proxy + "/openai/v1", api_key=OPENAI_KEY, max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": QUESTIONS[0]}])
    fake.status = 429
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    client.close()  # its pooled sockets: unclosed, a later test fails on their ResourceWarning
    bad = httpx.post(proxy + "/nowhere/v1/chat/completions", json=CHAT, headers=KEYS)
    assert bad.status_code == 404
    assert all(s.headers["authorization"] == f"Bearer {OPENAI_KEY}" for s in fake.seen)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "proxy POST /openai/v1/chat/completions" in logged  # the proxy did log
    for key in (OPENAI_KEY, ANTHROPIC_KEY, "TESTKEY"):
        assert key not in logged and key not in bad.text
        for path in store_backend.home.rglob("*"):  # the store's files (SQLite)
            if path.is_file():
                assert key.encode() not in path.read_bytes(), path


def test_upstream_errors_arrive_unchanged(proxy: str, fake: Upstream) -> None:
    fake.status = 429
    resp = httpx.post(proxy + "/openai/v1/chat/completions", json=CHAT, headers=KEYS)
    assert resp.status_code == 429 and resp.headers["retry-after"] == "7"
    assert resp.json() == {"error": {"type": "rate_limit_error", "message": "slow down (fake)"}}
    client = openai.OpenAI(base_url=proxy + "/openai/v1", api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="m", messages=CHAT["messages"])  # type: ignore[arg-type]
    client.close()
    assert raised.value.status_code == 429


def test_an_unreachable_upstream_is_a_502_naming_it(filled: MemoryEngine) -> None:
    with proxy_for(filled, "http://127.0.0.1:9") as (url, _):
        resp = httpx.post(url + "/openai/v1/chat/completions", json=CHAT, headers=KEYS)
    assert resp.status_code == 502 and "upstream 'openai' could not be reached" in resp.text
    assert OPENAI_KEY not in resp.text


def test_a_memlane_failure_forwards_without_memory(
    proxy: str, fake: Upstream, filled: MemoryEngine, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    def broken(*args: object, **kwargs: object) -> None:
        raise StoreError("the store is gone (test)")

    monkeypatch.setattr(filled, "turn", broken)
    resp = httpx.post(proxy + "/openai/v1/chat/completions", json=CHAT, headers=KEYS)
    assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"]
    assert fake.seen[-1].json() == CHAT  # forwarded, without memory
    assert "memory left out of this request" in caplog.text and "StoreError" in caplog.text


def test_sse_passes_event_by_event_with_its_bytes_unchanged(proxy: str, fake: Upstream) -> None:
    fake.event_delay_s = 0.4
    started = time.monotonic()
    body = {**CHAT, "stream": True}
    with httpx.stream("POST", proxy + "/openai/v1/chat/completions", json=body, headers=KEYS) as r:
        chunks = []
        first_at = None
        for chunk in r.iter_raw():
            first_at = first_at or time.monotonic() - started
            chunks.append(chunk)
    total = time.monotonic() - started
    assert b"".join(chunks) == fake.sent[-1]  # every byte the upstream sent, as sent
    assert first_at is not None and first_at < total - 1.0  # not buffered whole (5 x 0.4 s)
    assert any("peanuts" in f for f in facts_in(fake.seen[-1]))


def test_a_client_that_goes_away_cancels_the_upstream(proxy: str, fake: Upstream) -> None:
    fake.event_delay_s, fake.events = 0.2, 100
    body = {"model": "c", "max_tokens": 9, "stream": True, "messages": CHAT["messages"]}
    with httpx.stream("POST", proxy + "/anthropic/v1/messages", json=body, headers=KEYS) as r:
        next(r.iter_raw())  # the first event, then the client goes away
    deadline = time.monotonic() + 10
    while fake.cancelled == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.cancelled == 1 and fake.finished == 0


def test_a_slow_memory_step_never_stalls_another_stream(
    proxy: str, fake: Upstream, filled: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One request alone runs the engine on the event loop's thread (no hop, docs/proxy.md
    "Speed"); with another in flight, in a worker thread: a stream keeps flowing meanwhile."""
    turn = filled.turn

    def slow(session: str, message: str, **kwargs: Any) -> Turn:
        if "slowly" in message:
            time.sleep(1.5)
        return turn(session, message, **kwargs)

    monkeypatch.setattr(filled, "turn", slow)
    fake.event_delay_s, fake.events = 0.1, 10
    second: dict[str, httpx.Response] = {}
    slow_body = {"model": "m", "messages": [{"role": "user", "content": QUESTIONS[0] + " slowly"}]}
    gaps, last = [], None
    worker = threading.Thread(
        target=lambda: second.update(
            r=httpx.post(proxy + "/openai/v1/chat/completions", json=slow_body, headers=KEYS)
        )
    )
    body = {**CHAT, "stream": True}
    with httpx.stream("POST", proxy + "/openai/v1/chat/completions", json=body, headers=KEYS) as r:
        for chunk in r.iter_raw():
            now = time.monotonic()
            if last is None:
                worker.start()  # the slow request arrives while this stream is in flight
            else:
                gaps.append(now - last)
            last = now
            assert chunk
    worker.join(timeout=30)
    assert second["r"].status_code == 200
    assert any("peanuts" in f for f in facts_in(fake.seen[-1]))  # its memory, after 1.5 s
    assert len(gaps) >= 5 and max(gaps) < 1.0, gaps  # the stream never waited on it
