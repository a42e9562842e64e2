"""Shared helpers of the server tests: an app over a test engine, driven through httpx."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

from conftest import Backend
from memlane.server.app import create_app
from memlane.server.state import ServerState

ALICE, BOB, ADMIN = "alice-token", "bob-token", "admin-token"


@contextmanager
def serve_app(backend: Backend, **settings: Any) -> Iterator[tuple[TestClient, ServerState]]:
    """A :class:`TestClient` (httpx) over the app of a hash-embedder engine on ``backend``;
    ``settings`` are overrides kept across reloads (``server={"token": ...}``)."""
    engine = backend.engine(**settings)
    state = ServerState(engine, overrides={"store": backend.store_settings(), **settings})
    with TestClient(create_app(state), raise_server_exceptions=False) as client:
        yield client, state


def token_settings() -> dict[str, Any]:
    return {"server": {"token": ADMIN, "owner_tokens": {"alice": ALICE, "bob": BOB}}}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
