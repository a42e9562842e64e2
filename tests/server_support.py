"""Shared helpers of the server tests: an app over a test engine, driven through httpx."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
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
    with TestClient(
        create_app(state), raise_server_exceptions=False, base_url="http://localhost"
    ) as client:
        yield client, state


def token_settings() -> dict[str, Any]:
    return {"server": {"token": ADMIN, "owner_tokens": {"alice": ALICE, "bob": BOB}}}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    log: Path


@contextmanager
def run_server(backend: Backend) -> Iterator[Served]:
    """The real ``memlane serve`` (uvicorn) in a subprocess on a free loopback port, with the
    hash embedder; yields once ``/health`` answers 200 (or the process ended)."""
    port = free_port()
    log = (backend.home / "serve.log").open("w")  # a pipe nobody reads could fill and block it
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlane", "serve", "--port", str(port)],
        env=backend.child_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60  # bounded wait for start-up
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    try:
        yield Served(proc, url, backend.home / "serve.log")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        log.close()
