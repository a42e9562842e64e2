"""PostgreSQL's own promises (the shared contract runs in test_store and the engine suites):
named migrations and the HNSW parameters, another process's writes reaching this one's BM25
cache, a lost connection as a clear StoreError that the next call recovers from, threads of one
process adding the same text at once, and a server killed mid-import and restarted (nothing
acknowledged lost, nothing half-written)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Backend
from memlane import Decision, HashEmbedder, MemoryEngine, ReadOnlyStore, StoreError
from memlane._text import content_hash
from test_crash import COMMITTED, acknowledged, import_command, texts
from test_crash import texts as texts_of_crash_test

psycopg = pytest.importorskip("psycopg")
server = pytest.importorskip("memlane.store.postgres.server")
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from memlane.store.postgres import PostgresStore  # noqa: E402
from memlane.store.postgres.migrations import MIGRATIONS  # noqa: E402

EMB = HashEmbedder()


def sql(backend: Backend, query: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        cur = conn.execute(query, args)
        return list(cur.fetchall()) if cur.description else []


def test_migrations_recorded_and_hnsw_settings_used(postgres_backend: Backend) -> None:
    settings = postgres_backend.settings(store={"hnsw_m": 8, "hnsw_ef_construction": 32})
    engine = postgres_backend.engine(settings=settings)
    engine.add("survives reopening")
    postgres_backend.close_all()
    for _ in range(2):
        postgres_backend.engine().close()
    names = [r[0] for r in sql(postgres_backend, "SELECT name FROM migrations ORDER BY name")]
    assert names == [name for name, _ in MIGRATIONS]
    assert sql(postgres_backend, "SELECT count(*) FROM memories") == [(1,)]
    meta = dict(sql(postgres_backend, "SELECT key, value FROM meta"))  # type: ignore[arg-type]
    assert meta["embedding.model"] == "hash-384" and meta["embedding.dimension"] == "384"
    (index,) = sql(
        postgres_backend,
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw'",
    )
    assert "hnsw" in str(index[0]) and "vector_cosine_ops" in str(index[0])
    assert "m='8'" in str(index[0]) and "ef_construction='32'" in str(index[0])
    # room on each page, so that access-count updates stay HOT (no index touched, HNSW included)
    (options,) = sql(postgres_backend, "SELECT reloptions FROM pg_class WHERE relname = 'memories'")
    assert "fillfactor=80" in list(options[0] or [])
    # the full-text column is kept by PostgreSQL itself (SQL-side queries)
    hits = sql(
        postgres_backend,
        "SELECT content FROM memories WHERE fts @@ plainto_tsquery('english', 'reopened')",
    )
    assert hits == [("survives reopening",)]


def test_another_process_writes_reach_this_caches(postgres_backend: Backend) -> None:
    a = postgres_backend.engine()
    b = postgres_backend.engine()  # another pool, another cache: another process's view
    first = a.add("the lighthouse keeper paints the door blue").memory
    assert [h.memory.id for h in b.search("lighthouse", mode="fts")] == [first.id]
    second = a.add("the ferry to the lighthouse leaves at noon").memory
    assert {h.memory.id for h in b.search("lighthouse", mode="fts")} == {first.id, second.id}
    a.update(first.id, "the keeper paints the gate green")
    a.forget(second.id)
    assert b.search("lighthouse", mode="fts") == []
    assert [h.memory.id for h in b.search("gate green", mode="fts")] == [first.id]
    # and a near-duplicate of a's memory is seen by b's dedup lookup
    again = b.add("the keeper paints the gate green")
    assert again.decision is Decision.HASH_EXACT and again.memory.id == first.id


def test_a_lost_connection_is_a_store_error_and_the_next_call_reconnects(
    postgres_backend: Backend,
) -> None:
    engine = postgres_backend.engine()
    kept = engine.add("written before the connection was lost").memory
    store = engine.store
    assert isinstance(store, PostgresStore)
    # The server ends every connection of this database (as a restart or a failover does).
    sql(
        postgres_backend,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    with pytest.raises(StoreError) as info:
        engine.add("written while the connection was lost")
    message = str(info.value)
    assert "lost the connection" in message and "next call reconnects" in message
    assert "postgresql://postgres@127.0.0.1" in message  # names the server, no password
    # nothing of the failed call was written, and the next calls work
    assert engine.count() == 1
    assert engine.add("written after reconnecting").decision is Decision.ADDED
    hits = engine.search("before the connection", mode="fts")
    assert [h.memory.id for h in hits] == [kept.id]
    assert engine.count() == 2


def test_an_unreachable_server_names_the_dsn_and_the_fix(postgres_backend: Backend) -> None:
    dsn = f"postgresql://memlane:secret@127.0.0.1:{server.free_port()}/memlane"
    settings = postgres_backend.settings(store={"dsn": dsn, "connect_timeout_s": 2})
    with pytest.raises(StoreError) as info:
        postgres_backend.engine(settings=settings)
    message = str(info.value)
    assert "cannot connect to postgresql://memlane@127.0.0.1" in message
    assert "secret" not in message and "[store] dsn" in message


def test_threads_adding_the_same_text_at_once_store_it_once(postgres_backend: Backend) -> None:
    engine = postgres_backend.engine()
    texts = [line.split(": ", 1)[1] for line in texts_of_crash_test()[:20]]
    barrier = threading.Barrier(8)
    decisions: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            for text in texts:
                decisions.append(engine.add(text).decision.value)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    # the first add of each text stores it, the 7 others find it by its hash
    assert Counter(decisions) == {"added": 20, "hash_exact": 7 * 20}, Counter(decisions)
    assert engine.count() == 20
    memories = engine.list(limit=100)
    assert max(Counter(m.content_hash for m in memories).values()) == 1
    assert {m.confirmations for m in memories} == {7}


# --- a server killed mid-import ------------------------------------------------------------------

LINES = 1200


@pytest.fixture
def own_server() -> Iterator[Path]:
    """A PostgreSQL server of this test alone (it is killed and restarted)."""
    folder = Path(tempfile.mkdtemp(prefix="memlane-pg-kill-"))
    data = folder / "data"
    server.start(data)  # fsync on: a real server
    try:
        yield data
    finally:
        server.stop(data)
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def check_whole(dsn: str, lines: set[str], acked: set[str]) -> int:
    """Assert the database at ``dsn`` is whole; the number of memories."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT content, vector_dims(embedding), content_hash, change_seq, "
            "fts = to_tsvector('english', content) FROM memories"
        ).fetchall()
        contents = Counter(r[0] for r in rows)
        assert set(contents) <= lines, "a memory that is not a line of the file"
        assert max(contents.values(), default=1) == 1, contents.most_common(3)
        assert {r[1] for r in rows} <= {EMB.dimension}
        assert all(r[2] == content_hash(r[0]) for r in rows), "a hash of another text"
        assert len({r[3] for r in rows}) == len(rows) and all(r[4] for r in rows)
        kept = {
            r[0]
            for r in conn.execute(
                "SELECT new_text FROM dedup_log WHERE decision NOT IN ('hash_exact', 'auto_reject')"
            )
        }
        assert kept <= set(contents)
    missing = acked - set(contents)
    assert not missing, f"{len(missing)} acknowledged memories lost, e.g. {min(missing)!r}"
    return len(rows)


def test_server_killed_mid_import_loses_nothing_acknowledged(
    postgres_backend: Backend, own_server: Path, tmp_path: Path
) -> None:
    lines = texts()[:LINES]
    file = tmp_path / "memories.jsonl"
    file.write_text("".join(json.dumps({"content": t}) + "\n" for t in lines), encoding="utf-8")
    info = server.status(own_server)
    assert info is not None
    backend = Backend("postgres", postgres_backend.home, dsn=info.dsn)
    env = backend.child_env()
    acked: set[str] = set()
    for run in range(2):
        proc = subprocess.Popen(
            import_command(file),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        seen: list[str] = []
        reader = threading.Thread(target=seen.extend, args=(proc.stderr,), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        target = len(acked) + 200  # kill once this run has committed new memories
        while proc.poll() is None and time.monotonic() < deadline:
            done = [int(m.group(2)) for m in map(COMMITTED.search, list(seen)) if m]
            if done and max(done) >= target:
                break
            time.sleep(0.01)
        time.sleep(0.05 * run)
        server.kill(own_server)  # SIGKILL to the postmaster and every backend
        proc.wait(timeout=120)
        reader.join(timeout=30)
        proc.stderr.close()
        stderr = "".join(seen)
        assert proc.returncode != 0, "the import should have met the dead server"
        assert "lost the connection" in stderr or "cannot connect" in stderr, stderr[-2000:]
        acked |= acknowledged(stderr, lines)
        server.start(own_server)  # same folder, same port: crash recovery from the WAL
        count = check_whole(info.dsn, set(lines), acked)
        assert len(acked) <= count < LINES, (run, len(acked), count)

    done_run = subprocess.run(
        [sys.executable, *import_command(file)[1:]],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done_run.returncode == 0, done_run.stderr
    summary = json.loads(done_run.stdout)
    assert summary["imported"] == LINES and summary["errors"] == []
    assert check_whole(info.dsn, set(lines), set(lines)) == LINES
    with MemoryEngine(backend.settings(), backend.open_store(EMB), EMB) as engine:
        sample = lines[::100]
        for text in sample:
            assert [h.memory.content for h in engine.search(text, mode="fts", limit=1)] == [text]
    backend.close_all()


def test_a_read_only_database_serves_searches(postgres_backend: Backend) -> None:
    """A read replica (here: a database whose transactions are read-only) opens, searches and
    closes; a write is ReadOnlyStore, naming the fix."""
    engine = postgres_backend.engine()
    mid = engine.add("the replica still finds this lighthouse").memory.id
    postgres_backend.close_all()
    replica = make_conninfo(
        postgres_backend.dsn,
        options=conninfo_to_dict(postgres_backend.dsn)["options"]
        + " -c default_transaction_read_only=on",
    )
    engine = postgres_backend.engine(settings=postgres_backend.settings(store={"dsn": replica}))
    assert [h.memory.id for h in engine.search("lighthouse")] == [mid]  # access counts: kept
    with pytest.raises(ReadOnlyStore, match="read replica"):
        engine.add("a write on a replica")
    postgres_backend.close_all()  # the buffered access counts cannot be written: no error
