"""Shared parts of the proxy's tests: one fake upstream per test module (both API styles), a
proxy per test over the test's engine, and the checks on what the upstream received."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memlane import MemoryEngine
from memlane.eval.bench.proxy_upstream import Seen, Upstream, serve_in_thread
from memlane.proxy.app import create_app, serialize
from memlane.proxy.settings import ProxySettings

OPENAI_KEY = "sk-proj-TESTKEY-8c1f0e9a7b2d4c6e"
ANTHROPIC_KEY = "sk-ant-api03-TESTKEY-55d2a9c4e1"


@contextmanager
def proxy_for(
    engine: MemoryEngine | None, upstream_url: str, **settings: Any
) -> Iterator[tuple[str, ProxySettings]]:
    """A proxy over ``engine`` on a free loopback port with the upstreams ``openai`` (OpenAI
    style) and ``anthropic`` at the fake; yields its base URL and settings."""
    config = ProxySettings(
        upstreams={
            "openai": {"url": upstream_url + "/v1", "api": "openai"},
            "anthropic": {"url": upstream_url, "api": "anthropic"},
        },
        **settings,
    )
    with serve_in_thread(create_app(engine, config)) as url:
        yield url, config


@contextmanager
def fake_upstream() -> Iterator[tuple[Upstream, str]]:
    upstream = Upstream()
    with serve_in_thread(upstream.app()) as url:
        yield upstream, url


def facts_in(seen: Seen) -> list[str]:
    """The memory lines of one upstream request (every copy: a memory twice shows twice)."""
    return [
        line
        for text in _strings(json.loads(seen.body))
        for line in text.split("\n")
        if line.startswith("[fact] ")
    ]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def assert_prefix_kept(before: Seen, after: Seen, field: str) -> int:
    """``after``'s raw bytes start with ``before``'s up to the end of its conversation (the
    last item of ``field``): the prompt cache's prefix. Returns that prefix's length."""
    items = json.loads(before.body)[field]
    head = serialize(items)[:-1]  # the conversation without its closing bracket
    end = before.body.index(head) + len(head)
    assert after.body[:end] == before.body[:end], (
        f"prefix changed at byte {_first_difference(before.body, after.body)}:\n"
        f"{before.body[:end]!r}\n{after.body[:end]!r}"
    )
    return end


def _first_difference(a: bytes, b: bytes) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
