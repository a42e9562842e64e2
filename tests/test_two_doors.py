"""Two doors on one PostgreSQL store at once, in one project: the CLI (this process) adds the
project's memories while a real ``memlane serve`` (uvicorn, another process) on the same store
takes writes and injects for that project. Each door sees the other's writes as soon as they are
acknowledged (the search caches catch up from the store's change feed), a memory of another
project reaches neither, and neither door fails."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from conftest import Backend
from memlane.cli import app
from server_support import run_server

pytest.importorskip("psycopg")

PROJECT = "github.com/acme/shop"
OTHER = "github.com/acme/blog"


def fact(door: str, i: int) -> str:
    """A text of its own words (the hash embedder: no two facts are near-duplicates)."""
    return f"{door}{i} kestrel{door}{i} nests beside quarry{door}{i} near lake{door}{i}"


def cli(backend: Backend, *args: str) -> Any:
    result = CliRunner().invoke(app, [*args, "--json"], env=backend.child_env())
    assert result.exit_code == 0, (args, result.output, result.exception)
    return json.loads(result.stdout)


def test_cli_and_serve_share_a_project_on_one_postgres_store(postgres_backend: Backend) -> None:
    backend = postgres_backend
    rounds = 6
    cli_ids: dict[str, str] = {}
    http_ids: dict[str, str] = {}
    failures: list[str] = []
    with run_server(backend) as served, httpx.Client(base_url=served.url, timeout=60) as http:
        assert served.proc.poll() is None, served.log.read_text()
        cli(backend, "add", "the other project's secret recipe", "--project", OTHER)

        def cli_door() -> None:
            try:
                for i in range(rounds):
                    text = fact("cli", i)
                    added = cli(backend, "add", text, "--project", PROJECT)
                    cli_ids[text] = (added[0] if isinstance(added, list) else added)["memory"]["id"]
            except BaseException as exc:  # reported below, with the door's name
                failures.append(f"cli: {exc!r}")

        writer = threading.Thread(target=cli_door)
        writer.start()
        for i in range(rounds):  # meanwhile the server writes and injects in the project
            text = fact("http", i)
            body = {"project": PROJECT, "memory": {"content": text}}
            answer = http.post("/v1/memories", json=body)
            assert answer.status_code == 200, answer.text
            http_ids[text] = answer.json()["results"][0]["memory"]["id"]
            turn = http.post(
                "/v1/inject",
                json={"session": "busy", "text": fact("cli", i), "project": PROJECT},
            )
            assert turn.status_code == 200, turn.text
        writer.join(timeout=300)
        assert not writer.is_alive() and not failures, failures
        assert len(cli_ids) == rounds and len(http_ids) == rounds

        # the server sees every memory the CLI added: search and injection in the project
        for text, memory_id in cli_ids.items():
            hits = http.post("/v1/search", json={"query": text, "project": PROJECT, "limit": 3})
            assert hits.status_code == 200, hits.text
            assert hits.json()["hits"][0]["memory"]["id"] == memory_id
            shown = http.post(
                "/v1/inject",
                json={"session": f"fresh-{memory_id}", "text": text, "project": PROJECT},
            ).json()
            assert memory_id in [item["memory"]["id"] for item in shown["items"]]
            assert "secret recipe" not in (shown["block"] or "")
        # the other project's memory is not seen from this project over HTTP
        other = http.post(
            "/v1/search", json={"query": "the other project's secret recipe", "project": PROJECT}
        ).json()["hits"]
        assert all(h["memory"]["project"] in (None, PROJECT) for h in other)

    # the CLI sees every memory the server wrote, in the project and not in the other one
    listed = {m["id"] for m in cli(backend, "list", "--project", PROJECT, "--limit", "100")}
    assert set(http_ids.values()) | set(cli_ids.values()) <= listed
    for text, memory_id in http_ids.items():
        hits = cli(backend, "search", text, "--project", PROJECT, "--limit", "3")
        assert hits[0]["memory"]["id"] == memory_id
    elsewhere = {m["id"] for m in cli(backend, "list", "--project", OTHER, "--limit", "100")}
    assert not elsewhere & (set(http_ids.values()) | set(cli_ids.values()))
    log = served.log.read_text(encoding="utf-8")
    assert "Traceback" not in log and "ERROR" not in log, log
