"""End to end: the real `memlane serve` (uvicorn) in a subprocess on a free port, over loopback;
ready only once /health says so; SIGTERM stops it cleanly with the store closed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from conftest import Backend


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str


@pytest.fixture
def served(store_backend: Backend) -> Iterator[Served]:
    port = free_port()
    (store_backend.home / "memlane.toml").write_text(
        "# operator notes\n[injection]\nmax_total = 25\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlane", "serve", "--port", str(port)],
        env=store_backend.child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
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
        yield Served(proc, url)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def test_served_api_and_clean_sigterm(served: Served, store_backend: Backend) -> None:
    assert served.proc.poll() is None, "memlane serve exited at start"
    with httpx.Client(base_url=served.url, timeout=30) as http:
        assert http.get("/health").json()["status"] == "ready"
        added = http.post("/v1/memories", json={"memory": {"content": "The cat is called Miso"}})
        assert added.json()["results"][0]["decision"] == "added"
        hits = http.post("/v1/search", json={"query": "cat called Miso"}).json()["hits"]
        assert hits[0]["memory"]["content"] == "The cat is called Miso"
        put = http.put("/v1/settings/injection", json={"semantic_threshold": 0.9})
        assert put.status_code == 200
        assert http.get("/v1/memories/nope").status_code == 404
    text = (store_backend.home / "memlane.toml").read_text()
    assert "# operator notes" in text and "semantic_threshold = 0.9" in text
    served.proc.send_signal(signal.SIGTERM)
    _, err = served.proc.communicate(timeout=30)
    assert served.proc.returncode == 0, err
    assert "store closed" in err
    # the store is whole: another process reads the memory back
    engine = store_backend.engine()
    assert [m.content for m in engine.list()] == ["The cat is called Miso"]
