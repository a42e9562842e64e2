"""Export and import that round-trip (issue #24): ``memlane export`` of a store, imported into
an empty home, gives the same memories (ids, statuses, timestamps, counters, metadata), the same
histories and the same search results; hypothesis draws the stores."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import Backend
from memlane import MemoryEngine
from memlane.cli import app
from memlane.config import Settings
from memlane.errors import InvalidArgument
from memlane.transfer import export_lines, import_lines
from memlane.types import Status
from server_support import serve_app

WORDS = [
    "alpha",
    "bravo",
    "castle",
    "delta",
    "ember",
    "falcon",
    "garden",
    "harbor",
    "island",
    "jungle",
    "kettle",
    "lemon",
]


def open_engine(home: Path) -> MemoryEngine:
    return MemoryEngine.open(home, Settings.load(home, embedding={"provider": "hash"}))


def everything(engine: MemoryEngine) -> list[dict[str, Any]]:
    """Every memory of every owner, any status, with its history (what must round-trip)."""
    out = []
    for owner in sorted({o for o, *_ in engine.store.counts()}):
        for status in Status:
            for m in engine.store.list_memories(owner, limit=10_000, status=status):
                row = m.to_dict()
                row["history"] = [h.to_dict() for h in engine.store.history(owner, m.id)]
                out.append(row)
    return sorted(out, key=lambda r: str(r["id"]))


def searches(engine: MemoryEngine, queries: list[tuple[str, str]]) -> list[list[tuple[str, float]]]:
    return [
        [(h.memory.id, round(h.score, 6)) for h in engine.search(q, owner=o, limit=5)]
        for o, q in queries
    ]


memory = st.fixed_dictionaries(
    {
        "content": st.lists(st.sampled_from(WORDS), min_size=2, max_size=7).map(" ".join),
        "owner": st.sampled_from(["alice", "bob"]),
        "type": st.sampled_from(["fact", "preference", "goal", "event"]),
        "importance": st.floats(0, 1).map(lambda x: round(x, 3)),
        "metadata": st.dictionaries(
            st.sampled_from(["tag", "src", "n"]), st.integers(-5, 5) | st.text(max_size=8)
        ),
        "then": st.sampled_from(["keep", "update", "forget"]),
    }
)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(memory, min_size=1, max_size=8))
def test_export_then_import_into_an_empty_home_round_trips(items: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        source = open_engine(Path(one))
        try:
            for item in items:
                r = source.add(
                    item["content"],
                    owner=item["owner"],
                    type=item["type"],
                    importance=item["importance"],
                    metadata=item["metadata"],
                )
                if r.duplicate or r.memory.status is not Status.ACTIVE:
                    continue
                if item["then"] == "update":
                    source.update(r.memory.id, item["content"] + " again", owner=item["owner"])
                elif item["then"] == "forget":
                    source.forget(r.memory.id, owner=item["owner"])
            before = everything(source)
            exported = list(export_lines(source))
            queries = [(i["owner"], i["content"]) for i in items]
            found = searches(source, queries)
        finally:
            source.close()
        head = json.loads(exported[0])
        assert head["format"] == "memlane-export" and head["version"] == 1
        assert head["memories"] == len(before) == len(exported) - 1
        target = open_engine(Path(two))
        try:
            report = import_lines(target, exported)
            assert (report.restored, report.skipped, report.errors) == (len(before), 0, [])
            assert everything(target) == before
            assert searches(target, queries) == found
            again = import_lines(target, exported)  # the same file twice adds nothing
            assert (again.restored, again.skipped) == (0, len(before))
        finally:
            target.close()


def test_cli_and_http_export_import_on_each_backend(store_backend: Backend, tmp_path: Path) -> None:
    with serve_app(store_backend) as (client, _):
        for owner, text in [("alice", "the cellar key is blue"), ("bob", "bob likes tea")]:
            client.post("/v1/memories", json={"owner": owner, "memory": {"content": text}})
        resp = client.get("/v1/export", params={"owner": "alice"})
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("application/jsonl")
        lines = resp.text.splitlines()
        assert json.loads(lines[0])["owner"] == "alice" and len(lines) == 2
        assert json.loads(lines[1])["content"] == "the cellar key is blue"
    exported = tmp_path / "all.jsonl"
    env = store_backend.child_env()
    result = CliRunner().invoke(app, ["export"], env=env)
    assert result.exit_code == 0, result.output
    exported.write_text(result.stdout)
    assert len(exported.read_text().splitlines()) == 3
    fresh = store_backend.sibling(tmp_path / "fresh")
    restored = CliRunner().invoke(app, ["import", str(exported), "--json"], env=fresh.child_env())
    assert restored.exit_code == 0, restored.output
    assert json.loads(restored.stdout)["restored"] == 2
    engine = fresh.engine()
    assert [m.content for m in engine.list(owner="bob")] == ["bob likes tea"]


def test_an_unknown_version_is_refused(tmp_path: Path) -> None:
    engine = open_engine(tmp_path)
    try:
        with pytest.raises(InvalidArgument, match="version"):
            import_lines(engine, ['{"format": "memlane-export", "version": 9}'])
        with pytest.raises(InvalidArgument, match="header"):
            import_lines(engine, ['{"content": "x"}'])
    finally:
        engine.close()
