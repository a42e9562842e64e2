"""The store: the MemoryStore protocol on every backend, plus SQLite's own promises (migrations,
WAL, the vector index saved beside the file)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import memlane.store.sql.store as sql_store
from conftest import Backend
from memlane import (
    ChangeReason,
    Decision,
    EmbeddingMismatch,
    HashEmbedder,
    MemoryType,
    NotFound,
    Relation,
    ResetReason,
    SessionState,
    Status,
    StoreError,
)
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.embeddings import embed_texts
from memlane.store import MemoryStore, NewMemory
from memlane.store.base import NewDedupLog
from memlane.store.index_cache import IndexCache
from memlane.store.metadata import merge_metadata
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite.migrations import MIGRATIONS

EMB = HashEmbedder()


def vec(text: str) -> NDArray[np.float32]:
    out: NDArray[np.float32] = embed_texts(EMB, [text])[0]
    return out


def draft(text: str, owner: str = "default", agent: str | None = None, **kw: Any) -> NewMemory:
    return NewMemory(
        id=new_id(),
        content=text,
        content_hash=content_hash(text),
        type=kw.pop("type", MemoryType.FACT),
        importance=kw.pop("importance", 0.6),
        owner=owner,
        agent=agent,
        session=kw.pop("session", None),
        source=kw.pop("source", None),
        created_at=utcnow(),
        metadata=kw.pop("metadata", {}),
    )


def insert(store: MemoryStore, text: str, **kw: Any) -> str:
    with store.transaction():
        return store.insert(draft(text, **kw), vec(text)).id


# --- the protocol, on every backend ------------------------------------------------------------


def test_insert_get_and_find_by_hash(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    d = draft("Alice likes tea", metadata={"k": [1]}, source="chat", session="s1")
    with store.transaction():
        m = store.insert(d, vec(d.content))
    assert (m.id, m.content, m.owner, m.metadata, m.source, m.session) == (
        d.id,
        "Alice likes tea",
        "default",
        {"k": [1]},
        "chat",
        "s1",
    )
    assert store.get("default", m.id) == m
    assert store.get("default", "missing") is None
    assert store.get_many("default", [m.id, "missing", m.id]) == {m.id: m}
    assert store.find_by_hash("default", None, content_hash("ALICE  likes tea")) == m
    assert store.find_by_hash("other", None, d.content_hash) is None
    assert store.find_by_hash("default", "agent-x", d.content_hash) is None
    assert store.count() == store.count("default") == 1 and store.count("other") == 0


def test_transaction_rolls_back_whole(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    keep = insert(store, "kept memory")
    with pytest.raises(RuntimeError), store.transaction():
        mid = store.insert(draft("lost memory"), vec("lost memory")).id
        store.confirm("default", keep, {"sources": ["x"]})
        store.log_dedup(
            NewDedupLog(
                owner="default",
                new_text="lost memory",
                existing_id=keep,
                existing_text="kept memory",
                similarity=0.9,
                decision=Decision.GRAY_KEEP,
                reasoning=None,
            )
        )
        raise RuntimeError("boom")
    assert store.get("default", mid) is None
    assert store.get("default", keep).confirmations == 0  # type: ignore[union-attr]
    assert store.dedup_log("default") == []
    assert store.count() == 1
    # and the store still works after the rollback
    insert(store, "another memory")
    assert store.count() == 2


def test_writes_need_a_transaction(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    with pytest.raises(StoreError):
        store.insert(draft("no tx"), vec("no tx"))
    assert store.count() == 0


def test_nearest_sees_the_open_transaction_and_its_scope(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    insert(store, "Alice likes green tea", owner="a")
    insert(store, "Alice likes green tea", owner="b")
    insert(store, "Alice likes green tea", owner="a", agent="x")
    with store.transaction():
        pending = store.insert(draft("Alice likes green tea a lot", owner="a"), vec("a lot"))
        near = store.nearest("a", None, vec("Alice likes green tea"), 5)
        ids = [m.id for m, _ in near]
        assert pending.id in ids
        assert all(m.owner == "a" and m.agent is None for m, _ in near)
        assert len(near) == 2
    near = store.nearest("a", "x", vec("Alice likes green tea"), 5)
    assert [(m.owner, m.agent) for m, _ in near] == [("a", "x")]
    assert near[0][1] == pytest.approx(1.0, abs=1e-5)


def test_search_inside_a_transaction_never_keeps_its_uncommitted_rows(
    store_backend: Backend,
) -> None:
    """A leg searched inside a write transaction catches its index up with committed rows only:
    a rolled-back row never turns up later, and a committed one always does."""
    store = store_backend.open_store(EMB)
    before = insert(store, "the ferry to the island leaves at noon")
    lost_text, kept_text = "a lighthouse keeper feeds gulls", "a kite festival on the dunes"
    with pytest.raises(RuntimeError), store.transaction():
        lost = store.insert(draft(lost_text), vec(lost_text)).id
        assert [h.id for h in store.vector_search("default", None, vec(lost_text), 5)] == [before]
        assert _fts(store, "ferry lighthouse") == [before]
        raise RuntimeError("roll back")
    assert lost not in {h.id for h in store.vector_search("default", None, vec(lost_text), 5)}
    assert _fts(store, "lighthouse") == []
    with store.transaction():
        kept = store.insert(draft(kept_text), vec(kept_text)).id
        store.vector_search("default", None, vec(kept_text), 5)
        assert _fts(store, "kite") == []  # not committed yet
    hit = store.vector_search("default", None, vec(kept_text), 1)[0]
    assert hit.id == kept and hit.score == pytest.approx(1.0, abs=1e-4)
    assert _fts(store, "kite") == [kept]


def test_embeddings_and_cosines_are_the_stored_vectors(store_backend: Backend) -> None:
    from memlane import Status

    store = store_backend.open_store(EMB)
    tea, old = insert(store, "Alice likes tea"), insert(store, "Bob drove to work")
    with store.transaction():
        store.set_status("default", old, Status.FORGOTTEN)
    store.vector_search("default", None, vec("tea"), 5)  # the vector index holds tea
    with store.transaction():
        pending = store.insert(draft("Carol reads poems"), vec("Carol reads poems")).id
        got = store.embeddings("default", [tea, old, pending, "missing"])
        assert set(got) == {tea, old, pending}  # forgotten and uncommitted ones included
        for mid, text in ((tea, "Alice likes tea"), (old, "Bob drove to work")):
            np.testing.assert_allclose(got[mid], vec(text), atol=1e-6)
        np.testing.assert_allclose(got[pending], vec("Carol reads poems"), atol=1e-6)
    green = "Alice likes green tea"
    with store.transaction():
        store.replace_content(
            "default", tea, green, content_hash(green), vec(green), ChangeReason.UPDATE
        )
    np.testing.assert_allclose(store.embeddings("default", [tea])[tea], vec(green), atol=1e-6)
    cos = store.cosines("default", [tea, pending, "missing"], vec(green))
    assert set(cos) == {tea, pending}
    assert cos[tea] == pytest.approx(1.0, abs=1e-5)
    assert cos[pending] == pytest.approx(float(vec("Carol reads poems") @ vec(green)), abs=1e-5)
    assert store.embeddings("default", []) == {} and store.cosines("default", [], vec(green)) == {}


def test_fts_index_follows_content_updates(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    mid = insert(store, "The cat sleeps on the red sofa")
    other = insert(store, "Dogs bark at the mailman")
    assert [h.id for h in store.fts_search("default", None, "sofa", 10)] == [mid]
    with store.transaction():
        store.replace_content(
            "default",
            mid,
            "The cat sleeps in the garden",
            content_hash("x"),
            vec("garden"),
            ChangeReason.UPDATE,
        )
    assert store.fts_search("default", None, "sofa", 10) == []
    assert [h.id for h in store.fts_search("default", None, "garden", 10)] == [mid]
    # porter stemming, and terms are plain words, never query syntax
    assert [h.id for h in store.fts_search("default", None, "barking", 10)] == [other]
    for term in ['"', "NEAR(", "AND", "*", "col:", "sofa OR", "(", "ä"]:
        assert store.fts_search("default", None, term, 10) == []
    # forgotten memories leave the full-text leg
    from memlane import Status

    with store.transaction():
        store.set_status("default", other, Status.FORGOTTEN)
    assert store.fts_search("default", None, "dogs", 10) == []


def test_history_versions(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    mid = insert(store, "v0")
    for i in range(1, 4):
        with store.transaction():
            store.replace_content(
                "default", mid, f"v{i}", content_hash(f"v{i}"), vec(f"v{i}"), ChangeReason.UPDATE
            )
    versions = store.history("default", mid)
    assert [(v.version, v.content, v.reason) for v in versions] == [
        (1, "v0", ChangeReason.UPDATE),
        (2, "v1", ChangeReason.UPDATE),
        (3, "v2", ChangeReason.UPDATE),
    ]
    assert store.get("default", mid).content == "v3"  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        store.history("default", "missing")


def test_associations_both_directions(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    a, b, c = (insert(store, t) for t in ("aaa", "bbb", "ccc"))
    with store.transaction():
        store.add_association("default", a, b, Relation.RELATED_TO, 0.5)
        store.add_association(
            "default", a, b, Relation.RELATED_TO, 0.9
        )  # upsert keeps the max weight
        store.add_association("default", c, a, Relation.UPDATES, 0.3)
    assert {
        (x.source_id, x.target_id, x.relation, x.weight) for x in store.associations("default", a)
    } == {
        (a, b, Relation.RELATED_TO, 0.9),
        (c, a, Relation.UPDATES, 0.3),
    }

    def pairs(ids: list[str]) -> list[tuple[str, str]]:
        return sorted((x.source_id, x.target_id) for x in store.neighbours("default", ids))

    assert pairs([b]) == [(a, b)]
    assert pairs([c]) == [(c, a)]
    assert pairs([a, c]) == sorted([(a, b), (c, a)])  # touching both ids: listed once
    assert store.neighbours("default", []) == []


def test_a_turn_start_reads_the_vectors_of_its_window_only(store_backend: Backend) -> None:
    """start_turn's vectors: the memories shown within ``depth`` turns of the new turn (step
    5's window) and the candidates; one shown earlier is still tracked (pruning keeps 2 *
    depth turns) but its vector is not read."""
    store = store_backend.open_store(EMB)
    old, recent, candidate = (insert(store, t) for t in ("kites", "boats", "trains"))
    for turn, shown in ((1, old), (2, recent)):
        with store.transaction():
            assert store.start_turn("default", "s", 2, []).state.turn == turn
            store.finish_turn("default", "s", turn, [shown], {"skipped": {}})
    with store.transaction():
        start = store.start_turn("default", "s", 2, [candidate])
    assert start.state.turn == 3 and set(start.state.injected) == {old, recent}
    assert set(start.vectors) == {recent, candidate}
    assert np.allclose(start.vectors[recent], store.embeddings("default", [recent])[recent])


def test_a_turn_start_gives_each_vector_as_its_row_holds_it_at_the_start(
    store_backend: Backend,
) -> None:
    """start_turn's vectors are the rows' embeddings when the turn starts, also where SQLite
    takes them from its ANN index (loaded by a search): a memory another process re-embedded
    after this one's last search comes with its new vector, a forgotten one (out of the index)
    with its row's, and another owner's candidate not at all."""
    store = store_backend.open_store(EMB)
    kites, boats = insert(store, "kites"), insert(store, "boats")
    theirs = insert(store, "kites", owner="other")
    assert store.vector_search("default", None, vec("kites"), 5)  # the search caches loaded
    with store.transaction():
        store.start_turn("default", "s", 2, [])
        store.finish_turn("default", "s", 1, [kites, boats], {"skipped": {}})
    other = store_backend.open_store(EMB)  # another process on the same database
    with other.transaction():
        other.replace_content(
            "default", kites, "gliders", content_hash("gliders"), vec("gliders"),
            ChangeReason.UPDATE,
        )  # fmt: skip
        other.set_status("default", boats, Status.FORGOTTEN)
    with store.transaction():
        start = store.start_turn("default", "s", 2, [kites, theirs])
    assert set(start.vectors) == {kites, boats}
    assert np.allclose(start.vectors[kites], vec("gliders"))
    assert np.allclose(start.vectors[boats], vec("boats"))


def test_sessions_and_access_persist_across_reopen(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    mid = insert(store, "remember me")
    with store.transaction():
        state = store.start_turn("default", "s1", 10, []).state
        assert state.turn == 1
        store.finish_turn("default", "s1", 1, [mid], {"skipped": {}, "elapsed_ms": 1.0})
    store.close()
    again = store_backend.open_store(EMB)
    state = again.session("default", "s1")
    assert state.turn == 1 and dict(state.injected) == {mid: 1}
    m = again.get("default", mid)
    assert m is not None and m.access_count == 1 and m.last_accessed_at is not None
    (event,) = again.injection_events("default", "s1")
    assert event["memory_ids"] == [mid] and event["turn"] == 1


def test_a_turn_keeps_tracking_for_twice_the_window(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    a, b = insert(store, "first memory"), insert(store, "second memory")
    assert store.session("default", "s").turn == 0

    def begin() -> SessionState:
        return store.start_turn("default", "s", 2, []).state

    for turn, shown in ((1, [a]), (2, [b]), (3, [a])):  # a shown again: its latest turn counts
        with store.transaction():
            assert begin().turn == turn
            store.finish_turn("default", "s", turn, shown, {})
    assert dict(begin().injected) == {a: 3, b: 2}  # turn 4
    assert dict(begin().injected) == {a: 3, b: 2}  # turn 5
    state = begin()  # turn 6: turns <= 6 - 4 pruned
    assert (state.turn, dict(state.injected)) == (6, {a: 3})
    assert store.session("other", "s").turn == 0  # sessions are per owner
    reset = store.reset_session("default", "s", ResetReason.COMPACT)
    assert (reset.turn, reset.injected, reset.last_reset_reason) == (6, {}, "compact")
    assert reset.last_reset_at is not None
    assert [e["turn"] for e in store.injection_events("default", "s")] == [3, 2, 1]


def test_reopen_with_another_model_is_refused(store_backend: Backend) -> None:
    store_backend.open_store(HashEmbedder(384)).close()
    with pytest.raises(EmbeddingMismatch) as info:
        store_backend.open_store(HashEmbedder(256))
    message = str(info.value)
    assert "hash-384" in message and "hash-256" in message
    assert "384" in message and "256" in message


class _Renamed(HashEmbedder):
    """Same name as the hash embedder, another dimension."""

    def __init__(self, name: str, dimension: int) -> None:
        super().__init__(dimension)
        self._name = name

    @property
    def name(self) -> str:
        return self._name


def test_reopen_with_another_dimension_is_refused(store_backend: Backend) -> None:
    store_backend.open_store(_Renamed("my-model", 384)).close()
    with pytest.raises(EmbeddingMismatch, match=r"384 dims.*128 dims"):
        store_backend.open_store(_Renamed("my-model", 128))
    # the right model still opens it
    store_backend.open_store(_Renamed("my-model", 384)).close()


def test_closed_store_refuses_writes(store_backend: Backend) -> None:
    store = store_backend.open_store(EMB)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"), store.transaction():
        pass
    with pytest.raises(StoreError, match="closed"):
        store.get("default", "any")


# --- metadata merge (provenance) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "offered", "merged"),
    [
        ({}, {"a": 1}, {"a": 1}),
        ({"a": 1}, {"a": 1}, {"a": 1}),
        ({"a": 1}, {"a": 2}, {"a": [1, 2]}),
        ({"a": [1, 2]}, {"a": [2, 3]}, {"a": [1, 2, 3]}),
        ({"a": [1]}, {"a": 2}, {"a": [1, 2]}),
        ({"a": {"x": 1}}, {"a": {"y": 2}}, {"a": {"x": 1, "y": 2}}),
        ({"a": 1}, {"a": None}, {"a": 1}),
        ({"a": None}, {"a": 1}, {"a": 1}),
        ({"a": 1}, {"b": "x"}, {"a": 1, "b": "x"}),
    ],
)
def test_merge_metadata(
    existing: dict[str, Any], offered: dict[str, Any], merged: dict[str, Any]
) -> None:
    assert merge_metadata(existing, offered) == merged


# --- SQLite only -------------------------------------------------------------------------------


def test_migrations_recorded_and_idempotent(sqlite_backend: Backend) -> None:
    store = sqlite_backend.open_store(EMB)
    insert(store, "survives reopening")
    store.close()
    for _ in range(2):
        sqlite_backend.open_store(EMB).close()
    conn = sqlite3.connect(sqlite_backend.home / "memlane.db")
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY name")]
        assert names == [name for name, _ in MIGRATIONS]
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        assert meta["embedding.model"] == "hash-384" and meta["embedding.dimension"] == "384"
    finally:
        conn.close()


def test_wal_mode(sqlite_backend: Backend) -> None:
    store = sqlite_backend.open_store(EMB)
    assert isinstance(store, SQLiteStore)
    assert store.db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()
    conn = sqlite3.connect(sqlite_backend.home / "memlane.db")
    try:  # WAL is a property of the file: a plain connection sees it too
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_not_a_database_is_a_store_error(sqlite_backend: Backend) -> None:
    (sqlite_backend.home / "memlane.db").write_text("this is not sqlite " * 100)
    with pytest.raises(StoreError, match="memlane store"):
        sqlite_backend.open_store(EMB)


def test_busy_timeout_setting_survives_access_flushes(sqlite_backend: Backend) -> None:
    settings = sqlite_backend.settings(store={"busy_timeout_ms": 1234})
    store = sqlite_backend.open_store(EMB, settings)
    assert isinstance(store, SQLiteStore)
    mid = insert(store, "remember me")
    store.record_access("default", [mid])
    store.db.flush_access(force=True)
    assert store.db.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1234


def test_close_waits_for_another_writer_instead_of_failing(sqlite_backend: Backend) -> None:
    store = sqlite_backend.open_store(EMB)
    mid = insert(store, "remember me")
    store.record_access("default", [mid])  # buffered: flushed on close
    other = sqlite3.connect(
        sqlite_backend.home / "memlane.db", isolation_level=None, check_same_thread=False
    )
    other.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    timer.start()
    try:
        store.close()  # must not raise "database is locked"
    finally:
        timer.join()
        other.close()
    again = sqlite_backend.open_store(EMB)
    assert again.get("default", mid).access_count == 1  # type: ignore[union-attr]


class _LoadSpy:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loaded: list[bool] = []
        real = IndexCache.load_vector_file

        def spy(cache: IndexCache, owner: str) -> Any:
            index = real(cache, owner)
            self.loaded.append(index is not None)
            return index

        monkeypatch.setattr(IndexCache, "load_vector_file", spy)


def _search(store: MemoryStore, text: str) -> Sequence[tuple[str, float]]:
    return [(h.id, h.score) for h in store.vector_search("default", None, vec(text), 3)]


def test_vector_index_saved_reused_and_caught_up(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_store, "PERSIST_MIN_ROWS", 1)
    texts = [f"memory number {w} about {w} things" for w in ("red", "blue", "green", "gold")]
    first = sqlite_backend.open_store(EMB)
    ids = [insert(first, t) for t in texts]
    assert _search(first, texts[0])[0][0] == ids[0]
    first.close()
    vec_dir = sqlite_backend.home / "memlane.db.vec"
    assert [p.suffix for p in sorted(vec_dir.iterdir())] == [".json", ".usearch"]

    # A second process-like connection loads the saved index and reuses it.
    monkeypatch.setattr(sql_store, "PERSIST_MIN_ROWS", 10**9)  # it will not save
    spy = _LoadSpy(monkeypatch)
    second = sqlite_backend.open_store(EMB)
    assert _search(second, texts[1])[0][0] == ids[1]
    assert spy.loaded == [True]
    # ... and writes after the save: a new row, a changed text, a forgotten memory.
    new = insert(second, "a brand new memory on purple")
    from memlane import Status

    with second.transaction():
        silver = "now about silver"
        second.replace_content(
            "default", ids[2], silver, content_hash(silver), vec(silver), ChangeReason.UPDATE
        )
        second.set_status("default", ids[3], Status.FORGOTTEN)
    second.close()

    # A third connection loads the (now stale) saved index and catches up from the database.
    third = sqlite_backend.open_store(EMB)
    hit, score = _search(third, "a brand new memory on purple")[0]
    assert hit == new and score == pytest.approx(1.0, abs=1e-4)
    hit, score = _search(third, "now about silver")[0]
    assert hit == ids[2] and score == pytest.approx(1.0, abs=1e-4)
    assert ids[3] not in {h for h, _ in _search(third, texts[3])}
    assert spy.loaded == [True, True]
    assert isinstance(third, SQLiteStore)
    assert len(third.cache.vectors["default"]) == 4  # 5 rows, one forgotten


def test_saved_index_of_another_store_is_ignored(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_store, "PERSIST_MIN_ROWS", 1)
    store = sqlite_backend.open_store(EMB)
    insert(store, "old store memory")
    store.close()
    db = sqlite_backend.home / "memlane.db"
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    spy = _LoadSpy(monkeypatch)
    fresh = sqlite_backend.open_store(EMB)  # a new file at the same path, old .vec/ beside it
    mid = insert(fresh, "new store memory")
    assert [h for h, _ in _search(fresh, "old store memory")] == [mid]
    assert spy.loaded == [False]


def test_index_sees_rows_of_another_open_connection(sqlite_backend: Backend) -> None:
    a = sqlite_backend.open_store(EMB)
    b = sqlite_backend.open_store(EMB)
    insert(a, "first memory from a")
    assert _search(b, "first memory from a")  # b builds its index
    mid = insert(a, "second memory from a, later")
    time.sleep(0.01)
    assert _search(b, "second memory from a, later")[0][0] == mid
    near = b.nearest("default", None, vec("second memory from a, later"), 1)
    assert near[0][0].id == mid
    # the full-text index of b catches up the same way, forgotten rows included
    assert _fts(b, "later") == [mid]
    from memlane import Status

    with a.transaction():
        a.set_status("default", mid, Status.FORGOTTEN)
    assert _fts(b, "later") == []


def _fts(store: MemoryStore, text: str) -> list[str]:
    return [h.id for h in store.fts_search("default", None, text, 5)]


def test_text_index_saved_reused_and_caught_up(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_store, "PERSIST_MIN_ROWS", 1)
    first = sqlite_backend.open_store(EMB)
    ids = [insert(first, f"the {w} kite flew over the hill") for w in ("red", "blue", "green")]
    assert _fts(first, "blue kite")[0] == ids[1]
    first.close()
    saved = sqlite_backend.home / "memlane.db.vec"
    assert [p.name.split(".", 1)[1] for p in saved.glob("*.npz")] == ["bm25.npz"]

    loads: list[bool] = []
    real = IndexCache.load_text_file

    def spy(self: IndexCache, owner: str) -> Any:
        index = real(self, owner)
        loads.append(index is not None)
        return index

    monkeypatch.setattr(IndexCache, "load_text_file", spy)
    second = sqlite_backend.open_store(EMB)
    from memlane import Status

    with second.transaction():
        second.replace_content(
            "default", ids[0], "a yellow balloon", content_hash("y"), vec("y"), ChangeReason.UPDATE
        )
        second.set_status("default", ids[2], Status.FORGOTTEN)
    new = insert(second, "an orange kite tangled in the oak")
    # the saved copy, caught up from the database; equal scores: the older memory first
    assert _fts(second, "kite") == [ids[1], new]
    assert loads == [True]
    assert _fts(second, "yellow balloon") == [ids[0]]
    assert _fts(second, "green") == []
    second.close()

    # A saved copy from another store at the same path is ignored, not trusted.
    db = sqlite_backend.home / "memlane.db"
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    fresh = sqlite_backend.open_store(EMB)
    mid = insert(fresh, "a kite festival next spring")
    assert _fts(fresh, "kite") == [mid]
    assert loads == [True, False]


def test_corrupt_saved_text_index_is_rebuilt(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_store, "PERSIST_MIN_ROWS", 1)
    store = sqlite_backend.open_store(EMB)
    mid = insert(store, "the harbour ferry leaves at noon")
    assert _fts(store, "ferry") == [mid]
    store.close()
    for file in (sqlite_backend.home / "memlane.db.vec").glob("*.npz"):
        file.write_bytes(b"not an npz file")
    again = sqlite_backend.open_store(EMB)
    assert _fts(again, "harbour ferry") == [mid]


def test_agent_scope_is_not_crowded_out_by_other_agents_near_copies(
    store_backend: Backend,
) -> None:
    """The vector index holds every agent's memories of an owner; dozens of closer near-copies
    belonging to another agent must not hide the one memory in the asking agent's scope."""
    store = store_backend.open_store(EMB)
    with store.transaction():
        for i in range(60):
            text = f"deploy key rotates every friday note {i}"
            store.insert(draft(text, agent="ops"), vec(text))
    theirs = insert(store, "our deploy key rotation is on the first monday", agent="dev")
    shared = insert(store, "key rotation policy lives in the wiki")
    query = vec("deploy key rotates every friday")
    assert [h.id for h in store.vector_search("default", "dev", query, 2)] in (
        [theirs, shared],
        [shared, theirs],
    )
    near = store.nearest("default", "dev", query, 1)
    assert [m.id for m, _ in near] == [theirs]
    # the agent-less scope sees only shared memories
    assert [m.id for m, _ in store.nearest("default", None, query, 1)] == [shared]


def test_open_recomputes_hashes_of_an_older_hash_version(sqlite_backend: Backend) -> None:
    """A store written before the canonical form (hash v1) gets v2 hashes on open, so an exact
    repeat of an old memory is a hash hit again; history rows are rehashed too."""
    settings = sqlite_backend.settings()
    engine = sqlite_backend.engine(settings=settings)
    first = engine.add("Alice works at Acme.", owner="alice").memory
    engine.update(first.id, "Alice works at Initech.", owner="alice")
    engine.close()
    conn = sqlite3.connect(settings.db_path)  # as an older memlane left it
    with conn:
        conn.execute("UPDATE memories SET content_hash = 'v1:old'")
        conn.execute("UPDATE memory_history SET content_hash = 'v1:old'")
        conn.execute("DELETE FROM meta WHERE key = 'content_hash.version'")
    conn.close()
    engine = sqlite_backend.engine(settings=settings)
    current = engine.get(first.id, owner="alice")
    assert current.content_hash == content_hash("Alice works at Initech.")
    (old,) = engine.history(first.id, owner="alice")
    assert old.content_hash == content_hash("Alice works at Acme.")
    again = engine.add("alice works at initech", owner="alice")
    assert again.decision is Decision.HASH_EXACT and again.memory.id == first.id
    assert engine.count("alice") == 1
