"""Nothing a user typed is kept unless it is a memory (issue #33, item 1): the injection record
holds ids, counts and timings, never the turn's text; stores that kept it are scrubbed by a
migration on both backends (SQLite 0008, PostgreSQL 0006), and their files no longer hold it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import Backend
from memlane import HashEmbedder, MemoryEngine

GITHUB = "ghp_" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbAz"
PROMPT = f"deploy with {GITHUB} and <private>the launch codes 4-8-15-16-23-42</private> please"


def files_holding(folder: Path, needle: bytes) -> list[Path]:
    """Files under ``folder`` whose bytes contain ``needle``."""
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


def event_columns(engine: MemoryEngine) -> list[str]:
    store: Any = engine.store
    with store.db.read() as q:
        if store.db.dialect.name == "sqlite":
            return [str(r[1]) for r in q.all("PRAGMA table_info(injection_events)")]
        return [
            str(r[0])
            for r in q.all(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "AND table_schema = current_schema()",
                ("injection_events",),
            )
        ]


def test_an_injection_keeps_no_text_of_the_turn(store_backend: Backend) -> None:
    engine = store_backend.engine()
    engine.add("the deploy pipeline runs on buildkite", owner="alice")
    shown = engine.inject("s1", PROMPT, owner="alice", recent=[f"earlier: {GITHUB}"])
    assert shown.items, "the turn should have injected the memory"
    events = engine.session_events("s1", owner="alice")
    assert len(events) == 1 and events[0]["memory_ids"] == [shown.items[0].memory.id]
    assert "query" not in event_columns(engine)
    if store_backend.name == "sqlite":
        engine.close()
        for needle in (GITHUB, "launch codes", "deploy with"):
            assert files_holding(store_backend.home, needle.encode()) == [], needle


def _old_store(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store at the migrations before issue #33 whose injection events hold the prompt."""
    from memlane.store.postgres import migrations as pg_migrations
    from memlane.store.sqlite import migrations as sqlite_migrations

    module: Any = sqlite_migrations if backend.name == "sqlite" else pg_migrations
    last = "0007_pinned_indexes" if backend.name == "sqlite" else "0005_pinned_indexes"
    names = [name for name, _ in module.MIGRATIONS]
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", module.MIGRATIONS[: names.index(last) + 1])
        if backend.name == "sqlite":
            patch.setattr("memlane.store.sqlite.store.MIGRATIONS", module.MIGRATIONS)
        store: Any = backend.open_store(HashEmbedder())
        with store.transaction(), store.db.write() as q:
            q.many(
                "INSERT INTO injection_events (owner, session, turn, memory_ids, skipped, "
                "elapsed_ms, query, created_at) VALUES (?, ?, ?, '[]', '{}', 1.0, ?, ?)",
                [
                    # a long one too (SQLite: an overflow page); PostgreSQL compresses long
                    # values, so its short ones are what a byte scan can find
                    (
                        "alice",
                        "s1",
                        n,
                        f"{PROMPT} turn {n} " + "padding " * (300 * (n == 7)),
                        "2026-01-01",
                    )
                    for n in range(200)
                ],
            )
        store.close()
        backend.opened.remove(store)


def _pg_table_files(engine: MemoryEngine, data: Path) -> list[Path]:
    store: Any = engine.store
    with store.db.read() as q:
        rows = q.all(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c "
            "WHERE c.oid = to_regclass('injection_events') OR c.oid = "
            "(SELECT reltoastrelid FROM pg_class WHERE oid = to_regclass('injection_events'))"
        )
    return [data / str(r[0]) for r in rows if r[0]]


def test_the_migration_scrubs_the_stored_queries(
    store_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    _old_store(store_backend, monkeypatch)
    engine = store_backend.engine()  # opening applies the migration
    assert "query" not in event_columns(engine)
    assert len(engine.session_events("s1", owner="alice", limit=500)) == 200
    if store_backend.name == "sqlite":
        engine.close()
        assert files_holding(store_backend.home, b"launch codes") == []
        assert files_holding(store_backend.home, GITHUB.encode()) == []
    else:
        assert store_backend.pg is not None
        with store_backend.pg.admin() as conn:
            conn.execute("CHECKPOINT")  # the table's pages written to its files
        files = _pg_table_files(engine, store_backend.pg.data)
        assert files and all(p.exists() for p in files)
        for path in files:
            assert GITHUB.encode() not in path.read_bytes(), path
            assert b"launch codes" not in path.read_bytes(), path


PG_URL = "postgres://admin:" + "s3cr3t-Pa55w0rd" + "@db.internal:5432/app"
AWS_LINE = "AWS_SECRET_ACCESS_KEY=" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz9f8a7Q2e"


def test_every_stored_field_passes_the_secret_rules(store_backend: Backend) -> None:
    engine = store_backend.engine()
    added = engine.add(
        "the staging database lives on db.internal",
        owner="alice",
        source=f"{PG_URL}?sslmode=require <private>from my notes</private>",
        agent=f"agent-{GITHUB}",
        session=f"chat <private>about the launch codes</private>{GITHUB}",
        project=f"github.com/acme/{GITHUB}",
        metadata={AWS_LINE: "value", "note": f"see {PG_URL}"},
    )
    stored = engine.get(added.memory.id, owner="alice", agent=added.memory.agent)
    assert (
        stored.source
        == "postgres://admin:[redacted:url_password]@db.internal:5432/app?sslmode=require"
    )
    assert stored.agent == "agent-[redacted:github_token]"
    assert stored.session == "chat [redacted:github_token]"
    assert stored.project == "github.com/acme/[redacted:github_token]"
    assert set(stored.metadata) == {
        "AWS_SECRET_ACCESS_KEY=[redacted:aws_secret_access_key]",
        "note",
    }
    # the session as every call names it: the injection's tracking and the learn cursor agree
    engine.inject(f"chat <private>x</private>{GITHUB}", "where does staging live", owner="alice")
    assert engine.session(f"chat {GITHUB}", owner="alice").turn == 1
    assert [s["session"] for s in engine.session_list(owner="alice")] == [
        "chat [redacted:github_token]"
    ]


def test_dedup_log_texts_pass_the_secret_rules(store_backend: Backend) -> None:
    from memlane.store.records import NewDedupLog
    from memlane.types import Decision, ReviewStatus

    engine = store_backend.engine()
    kept = engine.add("the release train leaves on fridays", owner="alice")
    with engine.store.transaction():
        engine.store.log_dedup(
            NewDedupLog(
                owner="alice",
                new_text="the release train leaves on fridays <private>my diary</private>",
                existing_id=kept.memory.id,
                existing_text="the release train leaves on fridays",
                similarity=0.9,
                decision=Decision.LLM_KEEP,
                reasoning=f"the user pasted {GITHUB} and {PG_URL}",
                review_status=ReviewStatus.UNREVIEWED,
            )
        )
    (entry,) = engine.dedup_log(owner="alice")
    assert entry.new_text == "the release train leaves on fridays"
    assert GITHUB not in (entry.reasoning or "") and "s3cr3t" not in (entry.reasoning or "")
