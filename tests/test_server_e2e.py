"""End to end: the real `memlane serve` (uvicorn) in a subprocess on a free port, over loopback;
ready only once /health says so; SIGTERM stops it cleanly with the store closed."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import httpx
import pytest

from conftest import Backend
from server_support import Served, run_server


@pytest.fixture
def served(store_backend: Backend) -> Iterator[Served]:
    (store_backend.home / "memlane.toml").write_text(
        "# operator notes\n[injection]\nmax_total = 25\n"
    )
    with run_server(store_backend) as served:
        yield served


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
    served.proc.wait(timeout=30)
    err = served.log.read_text()
    assert served.proc.returncode == 0, err
    assert "store closed" in err
    # the store is whole: another process reads the memory back
    engine = store_backend.engine()
    assert [m.content for m in engine.list()] == ["The cat is called Miso"]


def test_importing_memlane_and_its_cli_loads_no_server() -> None:
    from test_imports import _loaded_after, _matching

    for statement in ("import memlane", "import memlane.cli"):
        modules = _loaded_after(statement)
        assert _matching(modules, "fastapi", "uvicorn", "starlette", "memlane.server") == []
