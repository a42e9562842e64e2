"""The engine is the only door (issue #25): the front doors (CLI, HTTP server and pages, MCP,
hooks, the evaluation commands, export/import) call :class:`memlane.MemoryEngine`'s methods and
never reach past it into the parts it wires (the store, the embedder, the write path...). And
each result type has one serialisation, whichever door answers.

The first test reads the doors' source (an AST scan): an attribute of those parts read on
anything named like an engine (``engine``, ``self.engine``, ``state.engine``, ``_engine``) fails
it, with the file and line to fix.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import httpx
from typer.testing import CliRunner

from conftest import Backend
from memlane.cli import app
from memlane.types import Memory, WriteResult
from server_support import run_server

SRC = Path(__file__).resolve().parents[1] / "src" / "memlane"
#: The front doors: every module under these folders, and these modules.
DOOR_FOLDERS = ("cli", "server", "mcp", "hooks", "eval")
DOOR_MODULES = ("transfer.py",)
#: What the engine wires and keeps to itself (engine.py, writes.py, views.py, upkeep.py).
PARTS = {
    "store",
    "_store",
    "embedder",
    "embeddings",
    "writer",
    "retriever",
    "injector",
    "sessions",
    "llm",
}
ENGINE = re.compile(r"(^|_)engine$")


def door_files() -> list[Path]:
    files = [p for folder in DOOR_FOLDERS for p in sorted((SRC / folder).rglob("*.py"))]
    return files + [SRC / name for name in DOOR_MODULES]


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def reaches_past(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, text)`` of each ``<engine>.<part>`` and ``getattr(<engine>, "<part>")``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PARTS:
            base = _last_name(node.value)
            if base is not None and ENGINE.search(base):
                found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in PARTS
        ):
            base = _last_name(node.args[0])
            if base is not None and ENGINE.search(base):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_scan_finds_a_door_reaching_past_the_engine() -> None:
    # the scan itself: each way a door could reach past the engine is caught, a setting is not
    sample = (
        "engine.store.count()\n"
        "state.engine.embedder.name\n"
        "self._engine.writer.validate(x)\n"
        "getattr(engine, 'embedder', None)\n"
        "settings.store.backend\n"
        "prepared.embedder.name\n"
        "engine.count()\n"
    )
    assert sorted(line for line, _ in reaches_past(ast.parse(sample))) == [1, 2, 3, 4]


def test_no_front_door_reaches_past_the_engine() -> None:
    files = door_files()
    assert len(files) > 40  # the folders are where this test thinks they are
    bad = [
        f"{path.relative_to(SRC)}:{line}: {text}"
        for path in files
        for line, text in reaches_past(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not bad, "doors reaching past the engine (give the engine a method):\n" + "\n".join(bad)


def cli(backend: Backend, *args: str) -> object:
    """``memlane ARGS --json`` on ``backend``'s store (in-process); its JSON answer."""
    result = CliRunner().invoke(app, [*args, "--json"], env=backend.child_env())
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_write_and_a_memory_read_the_same_through_the_cli_and_http(
    store_backend: Backend,
) -> None:
    # One serialisation of each result type: the CLI's --json and the real memlane serve
    # answer the same dict for the same memory (timestamps ISO 8601 with +00:00, as the CLI
    # prints them, not pydantic's Z), and a write's outcome is WriteResult.to_dict() on both.
    text = "Ada keeps her bike in the basement"
    added = cli(store_backend, "add", text)
    written = added[0] if isinstance(added, list) else added
    assert isinstance(written, dict)
    memory_id = written["memory"]["id"]
    with run_server(store_backend) as served:
        http_memory = httpx.get(f"{served.url}/v1/memories/{memory_id}").json()
        again = httpx.post(f"{served.url}/v1/memories", json={"memory": {"content": text}})
        assert again.status_code == 200, again.text
        http_write = again.json()["results"][0]
        http_after = httpx.get(f"{served.url}/v1/memories/{memory_id}").json()
    shown = cli(store_backend, "get", memory_id)
    assert isinstance(shown, dict)
    cli_memory = {k: v for k, v in shown.items() if k in Memory.__slots__}
    assert http_after == cli_memory
    assert http_memory["created_at"] == written["memory"]["created_at"]
    assert http_memory["created_at"].endswith("+00:00")
    assert set(http_write) == set(WriteResult.__slots__) | {"duplicate"}
    assert http_write["decision"] == "hash_exact" and http_write["duplicate"] is True
    assert http_write["memory"] == http_after
    assert set(written) == set(http_write)


def test_every_result_type_serialises_as_its_to_dict_through_pydantic(
    store_backend: Backend,
) -> None:
    # The HTTP API answers these types through pydantic (FastAPI's response models); the CLI,
    # MCP and exports through to_dict(). Both are one code path: each result the engine gives
    # serialises to the same JSON either way.
    from pydantic import TypeAdapter

    engine = store_backend.engine()
    first = engine.add("Ada keeps her bike in the basement", owner="ada")
    again = engine.add("Ada keeps her bike in the basement", owner="ada")
    near = engine.add("Ada keeps her red bike in the basement", owner="ada")  # gray: unreviewed
    memory = engine.update(first.memory.id, "Ada keeps her bike in the garage", owner="ada")
    results: list[object] = [
        first,
        again,
        near,
        memory,
        *engine.history(memory.id, owner="ada"),
        *engine.search("where is the bike?", owner="ada"),
        engine.inject("s1", "where does Ada keep her bike?", owner="ada"),
        engine.session("s1", owner="ada"),
        *engine.dedup_log(owner="ada"),
    ]
    pending = engine.review_pending(owner="ada")
    results += pending
    results.append(engine.review(pending[0].id, "confirm", owner="ada"))
    kinds = {type(r).__name__ for r in results}
    assert {"WriteResult", "Memory", "MemoryVersion", "SearchHit", "Injection"} <= kinds
    assert {"SessionState", "DedupLogEntry", "ReviewOutcome"} <= kinds
    for result in results:
        to_dict = getattr(result, "to_dict")  # noqa: B009
        assert TypeAdapter(type(result)).dump_python(result, mode="json") == to_dict()
