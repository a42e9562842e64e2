"""Tests for memlane.eval.bench (the synthetic-memory generator) and ``memlane bench add|search|inject``.

Small stores with the HashEmbedder: what is checked is the shape and sanity of the reports and the
generator's determinism, never timings (machines are noisy).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlane.cli import app
from memlane.eval import bench
from memlane.types import MemoryType


@pytest.fixture
def hash_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")


def run_cli(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, ["bench", *args])
    assert result.exit_code == code, (
        f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        f"\n{result.exception!r}"
    )
    return result


# ------------------------------------------------------------------------------------ generator
def test_generator_is_deterministic_per_seed() -> None:
    a = bench.Generator(0).memories(500)
    assert a == bench.Generator(0).memories(500)
    assert a != bench.Generator(1).memories(500)
    # a shorter stream is a prefix of a longer one; later slices are the same as well
    g = bench.Generator(0)
    assert g.memories(100) == a[:100]
    assert g.memories(50, start=400) == a[400:450]
    assert bench.Generator(0).queries(40, 500) == bench.Generator(0).queries(40, 500)
    assert bench.Generator(0).queries(40, 500) != bench.Generator(1).queries(40, 500)


def test_generator_texts_are_distinct_and_realistic() -> None:
    memories = bench.Generator(3).memories(3000)
    texts = [m.content for m in memories]
    assert len(set(texts)) >= 0.95 * len(texts)
    vocabulary = {w for t in texts for w in re.findall(r"[a-z]+", t.lower())}
    assert len(vocabulary) > 1000
    types = Counter(m.type for m in memories)
    assert set(types) == {t.value for t in MemoryType}
    for text in texts:
        assert "{" not in text and "}" not in text and "_" not in text, text
        assert 20 <= len(text) <= 300, text
        assert text[0].isupper(), text
    # each template contributes; the sentences read like notes about people and projects
    assert len({m.content.split()[0] for m in memories}) > 100
    assert any(" works at " in t for t in texts)
    assert any(t.startswith("Project ") for t in texts)


def test_generator_near_repeats() -> None:
    memories = bench.Generator(0, near_repeats=0.2).memories(3000)
    kinds = Counter(m.kind for m in memories)
    assert set(kinds) == {"new", "repeat", "punctuation", "extend", "reword", "number"}
    assert 0.15 < 1 - kinds["new"] / len(memories) < 0.25
    for m in memories:
        base = memories[m.base]
        assert base.kind == "new" and m.base <= memories.index(m)
        if m.kind == "repeat":
            assert m.content == base.content
        elif m.kind == "extend":
            assert m.content.startswith(base.content.rstrip(".")) and m.content != base.content
        elif m.kind == "number":
            assert m.content != base.content
            assert re.sub(r"\d", "", m.content) == re.sub(r"\d", "", base.content)
        elif m.kind == "punctuation":
            assert re.sub(r"\W", "", m.content) == re.sub(r"\W", "", base.content)
    assert bench.Generator(0, near_repeats=0.0).memories(500)[-1].kind == "new"


def test_queries_hit_stored_facts_and_miss_unrelated_topics() -> None:
    g = bench.Generator(0)
    stored = {m.content for m in g.memories(800)}
    queries = g.queries(200, 800)
    assert len({q.text for q in queries}) == 200
    hits = [q for q in queries if q.hit]
    assert 0.55 < len(hits) / len(queries) < 0.85
    people = set(g.people)
    for q in queries:
        assert q.text.endswith(("?", ".")), q.text
        if q.hit:
            assert q.target in stored
            assert q.text != q.target  # a question, not the stored sentence
        else:
            assert q.target is None
            assert not any(p in q.text for p in people)
    # questions name what the stored fact is about
    named = sum(
        1 for q in hits if any(p in q.text and p in (q.target or "") for p in people)
    ) + sum(1 for q in hits if "Project" in (q.target or "") or "team" in (q.target or ""))
    assert named >= 0.8 * len(hits)


def test_conversation_has_sessions_and_recent_turns() -> None:
    turns = bench.Generator(0).conversation(30, 500, sessions=4)
    assert {t.session for t in turns} == {0, 1, 2, 3}
    by_session: dict[int, list[str]] = {}
    for t in turns:
        past = by_session.setdefault(t.session, [])
        assert list(t.recent) == past[-2:]
        past.append(t.text)


def test_percentiles() -> None:
    from memlane.eval.replay.report import latency

    assert bench.percentile([], 50) == 0.0
    assert bench.percentile([1.0, 2.0, 3.0], 50) == 2.0
    s = bench.latency_summary([float(i) for i in range(1, 101)])
    assert s == {"p50_ms": 50.5, "p95_ms": 95.05, "mean_ms": 50.5, "max_ms": 100.0}
    assert bench.latency_summary([], "single_")["single_p95_ms"] == 0.0
    # the replay's latencies are the same percentiles (linear interpolation)
    assert latency([1.0, 2.0, 3.0, 4.0]) == {"p50": 2.5, "p95": 3.85, "max": 4.0}


# ------------------------------------------------------------------------------------ commands
@pytest.mark.usefixtures("hash_env")
def test_bench_add_json(tmp_path: Path) -> None:
    home = tmp_path / "add"
    result = run_cli(
        "add",
        "--memories",
        "300",
        "--batch",
        "64",
        "--singles",
        "20",
        "--home",
        str(home),
        "--json",
    )
    data = json.loads(result.stdout)
    for key in ("memories", "batch_per_second", "single_p50_ms", "single_p95_ms"):
        assert key in data
    assert data["memories"] == 300
    assert data["batch_per_second"] > 0
    assert data["build_seconds"] > 0
    assert data["singles"] == 20
    assert 0 < data["single_p50_ms"] <= data["single_p95_ms"] <= data["single_max_ms"]
    assert 0 <= data["embed_share"] <= 1
    assert sum(data["decisions"].values()) == 300
    assert sum(data["single_decisions"].values()) == 20
    # dedup did real work on the near-repeats
    assert data["decisions"]["added"] < 300
    assert {"hash_exact", "auto_reject"} & set(data["decisions"])
    assert 0 < data["stored"] <= 300 + 20 + data["single_warmup"]
    assert (home / "memlane.db").is_file()
    # a table without --json; a non-empty home is refused
    result = run_cli("add", "--memories", "50", "--singles", "5", code=0)
    assert "bench add: 50 memories (hash-384, seed 0)" in result.stdout
    assert "memories/s" in result.stdout and "single add p50 ms (5)" in result.stdout
    assert "first 5 single adds not timed" in result.stderr
    result = run_cli("add", "--memories", "50", "--home", str(home), code=1)
    assert "not empty" in result.stderr


@pytest.mark.usefixtures("hash_env")
def test_bench_search_and_inject_json(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    common = ["--memories", "300", "--queries", "30", "--warmup", "2", "--cache-dir", str(cache)]
    search = json.loads(run_cli("search", *common, "--json").stdout)
    for key in ("memories", "queries", "p50_ms", "p95_ms", "build_seconds"):
        assert key in search
    assert search["memories"] == 300 and search["queries"] == 30
    assert 0 < search["p50_ms"] <= search["p95_ms"] <= search["max_ms"]
    assert search["build_seconds"] > 0 and search["build_reused"] is False
    assert search["hit_queries"] + search["miss_queries"] == 30
    assert search["hit_queries"] > 0 and search["miss_queries"] > 0
    assert 0.5 < search["recall_at_limit"] <= 1  # most stored facts are found
    assert search["warmup_queries"] == 2
    # the built store is cached by (model, N, seed) and reused
    built = list(cache.iterdir())
    assert len(built) == 1 and built[0].name == "hash-384-n300-seed0-g1"
    marker = json.loads((built[0] / "bench.json").read_text())
    assert search["stored"] == marker["build"]["stored"] > 0

    inject = json.loads(run_cli("inject", *common, "--sessions", "3", "--json").stdout)
    for key in ("memories", "queries", "p50_ms", "p95_ms", "build_seconds"):
        assert key in inject
    assert inject["queries"] == 30 and inject["sessions"] == 3
    assert 0 < inject["p50_ms"] <= inject["p95_ms"]
    assert inject["build_reused"] is True
    assert inject["build_seconds"] == search["build_seconds"]
    assert inject["stored"] == search["stored"]  # injecting writes no memory
    assert inject["items_per_turn"] > 0
    assert 0 < inject["turns_with_block"] <= 30

    table = run_cli("search", *common)
    assert "bench search: 300 memories (hash-384, seed 0)" in table.stdout
    assert "p95 ms" in table.stdout
    assert f"{search['recall_at_limit']:.0%}" in table.stdout  # the same queries: the same recall
    assert "warm-up of 2 queries" in table.stderr
    table = run_cli("inject", *common, "--sessions", "3")
    assert "bench inject: 300 memories (hash-384, seed 0)" in table.stdout
    assert "items injected per turn" in table.stdout
    assert "warm-up of 2 turns" in table.stderr


@pytest.mark.usefixtures("hash_env")
def test_runs_time_with_the_embedder_that_built_the_store(tmp_path: Path) -> None:
    prepared = bench.prepare_store(60, 0, home=None, cache_dir=tmp_path)
    assert prepared.reused is False
    built = prepared.embedder.seconds
    assert built > 0  # the build embedded through it
    result = bench.run_search(prepared, queries=5, warmup=1)
    assert prepared.embedder.seconds > built  # no second embedder (no second model load)
    assert result["queries"] == 5 and result["embed_share"] > 0
    again = bench.prepare_store(60, 0, home=None, cache_dir=tmp_path)
    assert again.reused is True and again.home == prepared.home
    assert again.build.to_dict() == prepared.build.to_dict()


@pytest.mark.usefixtures("hash_env")
def test_bench_home_must_be_empty_or_a_bench_store(tmp_path: Path) -> None:
    from memlane import MemoryEngine

    foreign = tmp_path / "mine"
    with MemoryEngine.open(foreign) as engine:
        engine.add("Alice likes tea.")
    result = run_cli("search", "--memories", "50", "--home", str(foreign), code=3)
    assert "bench" in result.stderr
    with MemoryEngine.open(foreign) as engine:  # untouched
        assert engine.count() == 1

    own = tmp_path / "own"
    args = ["--memories", "60", "--queries", "5", "--warmup", "0", "--home", str(own), "--json"]
    first = json.loads(run_cli("search", *args).stdout)
    again = json.loads(run_cli("inject", *args).stdout)
    assert first["build_reused"] is False and again["build_reused"] is True
    other = run_cli("search", *args[:1], "61", *args[2:], code=3)
    assert "--rebuild" in other.stderr
    rebuilt = json.loads(run_cli("search", *args, "--rebuild").stdout)
    assert rebuilt["build_reused"] is False
