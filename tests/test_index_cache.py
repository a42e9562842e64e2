"""The backend-neutral search caches (memlane.store.index_cache) against a fake change feed: an
in-memory list of rows, no database. What a backend must give is only the ChangeFeed protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from memlane._ids import utcnow
from memlane.store.index_cache import (
    PURGED,
    ChangeFeed,
    IndexCache,
    RowRef,
    TextChange,
    VectorChange,
)
from memlane.store.records import TextAsk, VectorAsk
from memlane.types import Memory, MemoryType, Status

DIM = 16


def unit(
    seed: int, near: NDArray[np.float32] | None = None, noise: float = 1.0
) -> NDArray[np.float32]:
    """A seeded unit vector; with ``near``, that vector plus ``noise`` times a random one."""
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    if near is not None:
        v = near + noise * v / np.linalg.norm(v)
    out: NDArray[np.float32] = (v / np.linalg.norm(v)).astype(np.float32)
    return out


@dataclass
class Row:
    key: int
    owner: str
    content: str
    embedding: NDArray[np.float32]
    agent: str | None = None
    type: str = "fact"
    status: str = "active"
    seq: int = 0
    project: str | None = None

    def memory(self) -> Memory:
        now = utcnow()
        return Memory(
            id=f"m{self.key}",
            owner=self.owner,
            agent=self.agent,
            session=None,
            source=None,
            type=MemoryType(self.type),
            content=self.content,
            content_hash=str(self.key),
            importance=0.5,
            status=Status(self.status),
            created_at=now,
            updated_at=now,
            last_accessed_at=None,
            access_count=0,
            confirmations=0,
            metadata={},
            project=self.project,
        )


@dataclass
class FakeFeed:
    """Committed rows numbered by a change counter; ``open_tx`` rows are visible to row reads
    but not to the change feed, like a backend's own uncommitted writes."""

    id: str = "store-1"
    rows: dict[int, Row] = field(default_factory=dict)
    open_tx: dict[int, Row] = field(default_factory=dict)
    seq: int = 0
    calls: list[tuple[str, str, int]] = field(default_factory=list)
    #: owner -> change number of its last purge (``mark=False`` purges leave none: a feed that
    #: never carries hard deletes, as before issue #33)
    marks: dict[str, int] = field(default_factory=dict)

    def commit(self, row: Row) -> Row:
        """Insert or change ``row`` (a new change number)."""
        self.seq += 1
        row.seq = self.seq
        self.rows[row.key] = row
        return row

    def add(self, key: int, owner: str, content: str, vec: NDArray[np.float32], **kw: str) -> Row:
        return self.commit(Row(key, owner, content, vec, **kw))

    def store_id(self) -> str:
        return self.id

    def purge(self, keys: Sequence[int], *, mark: bool = True) -> None:
        """Hard-delete rows ``keys`` (their owner's purge mark numbered as a change)."""
        for key in keys:
            row = self.rows.pop(key)
            if mark:
                self.seq += 1
                self.marks[row.owner] = self.seq

    def _changed(self, owner: str, watermark: int) -> tuple[list[Row], int]:
        rows = list(r for r in self.rows.values() if r.owner == owner and r.seq > watermark)
        if self.marks.get(owner, 0) > watermark:  # as the SQL feed's purge mark
            rows.append(Row(PURGED, owner, "", np.zeros(DIM, np.float32), seq=self.marks[owner]))
        rows.sort(key=lambda r: r.seq)
        return rows, (rows[-1].seq if rows else watermark)

    def vector_changes(self, owner: str, watermark: int) -> tuple[list[VectorChange], int]:
        self.calls.append(("vector", owner, watermark))
        rows, mark = self._changed(owner, watermark)
        return [(r.key, r.status == "active", r.embedding.tobytes()) for r in rows], mark

    def text_changes(self, owner: str, watermark: int) -> tuple[list[TextChange], int]:
        self.calls.append(("text", owner, watermark))
        rows, mark = self._changed(owner, watermark)
        changes = [
            (r.key, r.status == "active", r.content, r.agent, r.type, r.project) for r in rows
        ]
        return changes, mark

    def purged_after(self, owner: str, watermark: int) -> bool:
        return self.marks.get(owner, 0) > watermark

    def keys(self, owner: str) -> set[int]:
        return {k for k, r in self.rows.items() if r.owner == owner}

    def _visible(self, owner: str, keys: Sequence[int]) -> list[Row]:
        both = {**self.rows, **self.open_tx}
        return [both[k] for k in keys if k in both and both[k].owner == owner]

    def row_refs(self, owner: str, keys: Sequence[int]) -> dict[int, RowRef]:
        return {
            r.key: RowRef(f"m{r.key}", r.agent, r.type, r.status == "active", r.project)
            for r in self._visible(owner, keys)
        }

    def memories(self, owner: str, keys: Sequence[int]) -> dict[int, Memory]:
        return {r.key: r.memory() for r in self._visible(owner, keys)}

    def has_agent_scopes(self, owner: str) -> bool:
        return any(r.owner == owner and r.agent is not None for r in self.rows.values())


def _ids(hits: Sequence[tuple[str, float]]) -> list[str]:
    return [h[0] for h in hits]


def test_the_fake_feed_is_a_change_feed() -> None:
    feed: ChangeFeed = FakeFeed()  # mypy checks the protocol; this checks the fake is complete
    assert callable(feed.vector_changes) and callable(feed.row_refs)


def test_catch_up_applies_inserts_updates_and_status_changes_in_order() -> None:
    feed = FakeFeed()
    a, b, c = unit(1), unit(2), unit(3)
    feed.add(1, "o", "the red kite", a)
    feed.add(2, "o", "the blue boat", b)
    cache = IndexCache(feed, DIM, None)
    assert _ids(cache.vector_search(VectorAsk("o", None, a, 1))) == ["m1"]
    assert _ids(cache.fts_search(TextAsk("o", None, "kite", 5))) == ["m1"]

    # re-embed + new text of row 1, forget row 2, a new row 3: one catch-up applies all three
    feed.commit(Row(1, "o", "a green lantern", c))
    feed.commit(Row(2, "o", "the blue boat", b, status="forgotten"))
    feed.add(3, "o", "another red kite", a)
    assert _ids(cache.vector_search(VectorAsk("o", None, c, 1))) == ["m1"]
    assert _ids(cache.vector_search(VectorAsk("o", None, a, 5)))[0] == "m3"
    assert "m2" not in _ids(cache.vector_search(VectorAsk("o", None, b, 5)))
    assert _ids(cache.fts_search(TextAsk("o", None, "kite", 5))) == ["m3"]
    assert _ids(cache.fts_search(TextAsk("o", None, "lantern", 5))) == ["m1"]
    assert cache.fts_search(TextAsk("o", None, "boat", 5)) == []
    assert len(cache.vectors["o"]) == 2 and len(cache.texts["o"]) == 2

    # a row changed twice between catch-ups: the later change wins
    feed.commit(Row(3, "o", "a yellow kite", b))
    feed.commit(Row(3, "o", "a yellow kite", b, status="superseded"))
    assert "m3" not in _ids(cache.vector_search(VectorAsk("o", None, b, 5)))
    assert cache.fts_search(TextAsk("o", None, "yellow", 5)) == []


def test_catch_up_reads_from_its_watermark_per_owner() -> None:
    feed = FakeFeed()
    feed.add(1, "o", "first", unit(1))
    feed.add(2, "p", "other owner", unit(2))
    feed.add(3, "o", "second", unit(3))
    cache = IndexCache(feed, DIM, None)
    cache.vector_search(VectorAsk("o", None, unit(1), 3))
    cache.vector_search(VectorAsk("o", None, unit(1), 3))  # nothing new: asks from 3, reads no row
    feed.add(4, "o", "third", unit(4))
    cache.vector_search(VectorAsk("o", None, unit(1), 3))
    cache.vector_search(VectorAsk("p", None, unit(1), 3))
    assert feed.calls == [("vector", "o", 0), ("vector", "o", 3), ("vector", "o", 3),
                          ("vector", "p", 0)]  # fmt: skip
    assert cache.vectors["o"].watermark == 4 and cache.vectors["p"].watermark == 2
    # the text index keeps its own watermark on the same sequence
    cache.fts_search(TextAsk("o", None, "third", 1))
    assert feed.calls[-1] == ("text", "o", 0) and cache.texts["o"].watermark == 4
    # other owners' rows are never in an owner's index
    assert _ids(cache.vector_search(VectorAsk("o", None, unit(2), 5))) != [] and "m2" not in _ids(
        cache.vector_search(VectorAsk("o", None, unit(2), 5))
    )


def test_watermark_is_the_feeds_not_the_highest_row_seen() -> None:
    """A feed inside a write transaction returns its base as the watermark (no row of its own):
    the cache must keep what the feed says, so later committed rows are not skipped."""

    class TxFeed(FakeFeed):
        def vector_changes(self, owner: str, watermark: int) -> tuple[list[VectorChange], int]:
            rows, _ = super().vector_changes(owner, watermark)
            return [r for r in rows if r[0] != 2], 1  # row 2 (seq 2) not committed yet

    feed = TxFeed()
    feed.add(1, "o", "one", unit(1))
    feed.add(2, "o", "two", unit(2))
    cache = IndexCache(feed, DIM, None)
    assert _ids(cache.vector_search(VectorAsk("o", None, unit(2), 2))) == ["m1"]
    assert cache.vectors["o"].watermark == 1
    TxFeed.vector_changes = FakeFeed.vector_changes  # type: ignore[method-assign]
    assert _ids(cache.vector_search(VectorAsk("o", None, unit(2), 1))) == ["m2"]


def test_saved_round_trip_and_files_of_another_store_ignored(tmp_path: Path) -> None:
    feed = FakeFeed()
    for key in range(1, 6):
        feed.add(key, "o", f"note {key} about the kite festival", unit(key))
    cache = IndexCache(feed, DIM, tmp_path)
    before = (
        cache.vector_search(VectorAsk("o", None, unit(3), 3)),
        cache.fts_search(TextAsk("o", None, "kite", 3)),
    )
    cache.save(min_rows=10)  # too small to be worth a file
    assert list(tmp_path.iterdir()) == []
    cache.save(min_rows=1)
    assert sorted(p.name.split(".", 1)[1] for p in tmp_path.iterdir()) == [
        "bm25.npz",
        "json",
        "usearch",
    ]

    feed.calls.clear()
    again = IndexCache(feed, DIM, tmp_path)
    assert again.load_vector_file("o") is not None and again.load_text_file("o") is not None
    after = (
        again.vector_search(VectorAsk("o", None, unit(3), 3)),
        again.fts_search(TextAsk("o", None, "kite", 3)),
    )
    assert after == before
    assert again.vectors["o"].saved_at == 5 and again.texts["o"].saved_at == 5
    # loaded at watermark 5: the catch-up asks only for later changes
    assert ("vector", "o", 5) in feed.calls and ("vector", "o", 0) not in feed.calls

    other = IndexCache(FakeFeed(id="store-2", rows=feed.rows, seq=feed.seq), DIM, tmp_path)
    assert other.load_vector_file("o") is None and other.load_text_file("o") is None
    assert IndexCache(feed, DIM + 1, tmp_path).load_vector_file("o") is None  # other dimension
    assert IndexCache(feed, DIM, None).load_vector_file("o") is None  # no folder


def test_damaged_saved_files_load_as_none(tmp_path: Path) -> None:
    feed = FakeFeed()
    feed.add(1, "o", "the harbour ferry", unit(1))
    cache = IndexCache(feed, DIM, tmp_path)
    cache.vector_search(VectorAsk("o", None, unit(1), 1))
    cache.fts_search(TextAsk("o", None, "ferry", 1))
    cache.save(min_rows=1)
    for file in tmp_path.iterdir():
        file.write_bytes(b"garbage")
    again = IndexCache(feed, DIM, tmp_path)
    assert again.load_vector_file("o") is None and again.load_text_file("o") is None
    assert _ids(again.fts_search(TextAsk("o", None, "ferry", 1))) == ["m1"]  # rebuilt from the feed


def test_over_fetch_when_other_agents_or_types_crowd_the_scope_out() -> None:
    feed = FakeFeed()
    query = unit(0)
    for key in range(1, 61):  # sixty near-copies of another agent, all of type fact
        feed.add(key, "o", f"ops note {key}", unit(key, near=query, noise=0.1), agent="ops")
    feed.add(100, "o", "dev note", unit(100, near=query, noise=1.5), agent="dev")
    feed.add(101, "o", "shared note", unit(101, near=query, noise=2.0), type="preference")
    cache = IndexCache(feed, DIM, None)
    assert sorted(_ids(cache.vector_search(VectorAsk("o", "dev", query, 2)))) == ["m100", "m101"]
    assert _ids(cache.vector_search(VectorAsk("o", None, query, 1, [MemoryType.PREFERENCE]))) == [
        "m101"
    ]
    # nearest is exact-scope (dedup): the agent's own, then the shared scope's own
    assert [m.id for m, _ in cache.nearest("o", "dev", query, 1)] == ["m100"]
    assert [m.id for m, _ in cache.nearest("o", None, query, 1)] == ["m101"]
    # without any filter the near-copies win, as they should
    assert _ids(cache.vector_search(VectorAsk("o", None, query, 3)))[0].startswith(
        "m"
    ) and "m100" not in (_ids(cache.vector_search(VectorAsk("o", None, query, 3))))


def test_a_project_search_reads_only_rows_its_scope_sees() -> None:
    # 2,000 memories over 20 projects and 100 global ones, all near the query; a search in one
    # project finds the nearest of that project and the global ones, and reads no other
    # project's row (the scope comes from the BM25 index's codes, not from rows)
    feed = FakeFeed()
    query = unit(0)
    for key in range(1, 2101):
        project = None if key > 2000 else f"repo-{key % 20}"
        feed.commit(Row(key, "o", f"note {key}", unit(key, near=query, noise=0.8), project=project))
    read: list[int] = []
    refs = feed.row_refs

    def counting(owner: str, keys: Sequence[int]) -> dict[int, RowRef]:
        read.extend(keys)
        return refs(owner, keys)

    feed.row_refs = counting  # type: ignore[method-assign]
    cache = IndexCache(feed, DIM, None)
    hits = cache.vector_search(VectorAsk("o", None, query, 10, None, "repo-3"))
    seen = {k for k, r in feed.rows.items() if r.project in (None, "repo-3")}
    cosine = {k: float(feed.rows[k].embedding @ query) for k in seen}
    best = sorted(seen, key=lambda k: -cosine[k])[:10]
    assert _ids(hits) == [f"m{k}" for k in best]  # exact below 5,000: the scope's true top 10
    assert read and set(read) <= seen
    # a project with no memory of its own sees the global ones only
    only_global = cache.vector_search(VectorAsk("o", None, query, 5, None, "repo-none"))
    assert {feed.rows[int(h[0][1:])].project for h in only_global} == {None}


def test_pending_rows_seen_by_nearest_and_dropped_on_rollback() -> None:
    feed = FakeFeed()
    feed.add(1, "o", "committed", unit(1))
    cache = IndexCache(feed, DIM, None)
    new = unit(2)
    # the open transaction writes row 2 (visible to its own reads, not in the change feed)
    feed.open_tx[2] = Row(2, "o", "uncommitted", new)
    cache.note_pending("o", 2, None, new)
    feed.open_tx[3] = Row(3, "o", "theirs", unit(3), agent="someone")
    cache.note_pending("o", 3, "someone", unit(3))  # another agent's: only in its own scope
    assert [m.id for m, _ in cache.nearest("o", "someone", unit(3), 1)] == ["m3"]
    assert "m3" not in [m.id for m, _ in cache.nearest("o", None, unit(3), 2)]
    near = cache.nearest("o", None, new, 1)
    assert [m.id for m, _ in near] == ["m2"] and near[0][1] == pytest.approx(1.0, abs=1e-5)
    # the ranked legs see committed rows only ...
    assert _ids(cache.vector_search(VectorAsk("o", None, new, 5))) == ["m1"]
    # ... and not a row this transaction took out of search (index behind, row read current)
    feed.open_tx[1] = Row(1, "o", "committed", unit(1), status="forgotten")
    assert cache.vector_search(VectorAsk("o", None, unit(1), 5)) == []
    assert cache.nearest("o", None, unit(1), 5)[0][0].id == "m2"
    del feed.open_tx[1]

    feed.open_tx.clear()  # rollback
    cache.discard_pending()
    assert cache.pending == {}
    assert [m.id for m, _ in cache.nearest("o", None, new, 1)] == ["m1"]

    # commit: the feed returns the row, the index holds it from then on
    feed.add(2, "o", "uncommitted", new)
    cache.discard_pending()
    assert [m.id for m, _ in cache.nearest("o", None, new, 1)] == ["m2"]


def test_fts_query_without_content_words_or_k_zero_is_empty() -> None:
    feed = FakeFeed()
    feed.add(1, "o", "the kite", unit(1))
    cache = IndexCache(feed, DIM, None)
    assert cache.fts_search(TextAsk("o", None, "the and of", 5)) == []
    assert cache.fts_search(TextAsk("o", None, "kite", 0)) == []
    assert feed.calls == []  # nothing to look up: the index is not even built


def _files_holding(folder: Path, needle: bytes | str) -> list[str]:
    """Files of ``folder`` holding ``needle`` (a text: as UTF-8 or as numpy's UTF-32 strings)."""
    forms = [needle] if isinstance(needle, bytes) else [needle.encode(), needle.encode("utf-32-le")]
    return sorted(p.name for p in folder.iterdir() if any(f in p.read_bytes() for f in forms))


def test_a_purge_in_the_feed_rebuilds_an_index_built_before_it(tmp_path: Path) -> None:
    """Issue #33: another process purged a row; this cache meets the owner's purge mark at its
    next catch-up, drops both indexes and their files, and rebuilds from the rows left."""
    feed = FakeFeed()
    for key in range(1, 6):
        feed.add(key, "o", f"note {key} about the harbour", unit(key))
    feed.add(9, "o", "the zanzibarite password hint", unit(9))
    feed.add(20, "p", "the zanzibarite of another owner", unit(20))
    cache = IndexCache(feed, DIM, tmp_path)
    assert _ids(cache.fts_search(TextAsk("o", None, "zanzibarite", 5))) == ["m9"]
    cache.vector_search(VectorAsk("o", None, unit(9), 1))
    cache.fts_search(TextAsk("p", None, "zanzibarite", 5))
    cache.save(min_rows=1)
    vector_bytes = unit(9).tobytes()
    assert _files_holding(tmp_path, "zanzibar") and _files_holding(tmp_path, vector_bytes)

    feed.purge([9])  # what another process did: its own files are its own business
    assert cache.fts_search(TextAsk("o", None, "zanzibarite", 5)) == []
    assert 9 not in cache.texts["o"].key_set() and len(cache.texts["o"]) == 5
    # the owner's saved files went with it; the other owner's stay
    assert _files_holding(tmp_path, vector_bytes) == []
    assert len(_files_holding(tmp_path, "zanzibar")) == 1  # p's BM25 file
    assert _ids(cache.vector_search(VectorAsk("o", None, unit(3), 1))) == ["m3"]
    assert 9 not in cache.vectors["o"].keys().tolist() and len(cache.vectors["o"]) == 5
    cache.save(min_rows=1)
    assert _files_holding(tmp_path, vector_bytes) == []
    # later changes still arrive (the rebuilt index read from 0, the mark included)
    feed.add(10, "o", "a new harbour note", unit(10))
    assert _ids(cache.fts_search(TextAsk("o", None, "new harbour", 1))) == ["m10"]


def test_save_checks_the_rows_against_the_store(tmp_path: Path) -> None:
    """Belt and braces: a feed that never carried a hard delete (no purge mark) still never
    gets the purged row saved: save() compares the index's keys with the store's."""
    feed = FakeFeed()
    for key in range(1, 6):
        feed.add(key, "o", f"note {key} about the quokkas", unit(key))
    cache = IndexCache(feed, DIM, tmp_path)
    cache.fts_search(TextAsk("o", None, "quokkas", 5))
    cache.vector_search(VectorAsk("o", None, unit(1), 1))
    feed.purge([5], mark=False)
    feed.add(6, "o", "a later note", unit(6))  # the index changed since loaded: due a save
    cache.fts_search(TextAsk("o", None, "later", 1))
    cache.vector_search(VectorAsk("o", None, unit(6), 1))
    cache.save(min_rows=1)
    assert list(tmp_path.iterdir()) == []  # dropped, not saved
    assert "o" not in cache.texts and "o" not in cache.vectors
    assert _ids(cache.fts_search(TextAsk("o", None, "note", 9))) != []  # rebuilt on next use
    assert 5 not in cache.texts["o"].key_set()


def test_a_purge_during_a_save_removes_what_was_written(tmp_path: Path) -> None:
    """The purging process removes the files after its commit; a save that checked the store
    before that commit and wrote after the removal looks again and removes its own files."""
    feed = FakeFeed()
    for key in range(1, 4):
        feed.add(key, "o", f"note {key} on the wombat", unit(key))
    cache = IndexCache(feed, DIM, tmp_path)
    cache.fts_search(TextAsk("o", None, "wombat", 5))
    keys = feed.keys

    def keys_then_purge(owner: str) -> set[int]:
        found = keys(owner)
        feed.purge([3])  # commits between the check and the write
        return found

    feed.keys = keys_then_purge  # type: ignore[method-assign]
    cache.save(min_rows=1)
    assert list(tmp_path.iterdir()) == []
