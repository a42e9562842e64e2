"""Real deletion (issue #24): ``purge`` removes a memory's text from the memory, its history,
the dedup log, associations, session records and the search indexes, on both backends; on
SQLite the database files (and the WAL, and the saved indexes) no longer hold the bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import Backend
from memlane import MemoryEngine
from memlane.cli import app
from memlane.errors import NotFound
from memlane.types import Status
from server_support import serve_app

MARK = "quokkamarmalade"  # one word: what the grep looks for


def files_holding(home: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(home))
        for p in home.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


def fill(engine: MemoryEngine, owner: str) -> str:
    """A memory with the mark in its text, its history, the dedup log, a session and a link."""
    first = engine.add(f"the {MARK} recipe needs two lemons", owner=owner)
    mid = first.memory.id
    engine.update(mid, f"the {MARK} recipe needs three lemons", owner=owner)
    engine.add(f"the {MARK} recipe needs three lemons", owner=owner)  # a hash_exact log row
    engine.inject("chat", f"how do I make {MARK}?", owner=owner)
    engine.add("the bakery opens at seven", owner=owner)
    return mid


def test_purge_removes_every_copy_of_the_text(engine: MemoryEngine) -> None:
    mid = fill(engine, "alice")
    other = fill(engine, "bob")
    assert engine.purge(mid, owner="alice") == 1
    with pytest.raises(NotFound):
        engine.get(mid, owner="alice", include_inactive=True)
    with pytest.raises(NotFound):
        engine.history(mid, owner="alice")
    assert engine.search(MARK, owner="alice") == []
    assert all(
        MARK not in (e.new_text + (e.existing_text or "")) for e in engine.dedup_log(owner="alice")
    )
    assert mid not in engine.session("chat", owner="alice").injected
    assert [m.content for m in engine.list(owner="alice")] == ["the bakery opens at seven"]
    # bob's copy of the same text is his: untouched
    assert engine.get(other, owner="bob").content.startswith(f"the {MARK}")
    assert engine.search(MARK, owner="bob")[0].memory.id == other


def test_a_forgotten_memory_can_be_purged(engine: MemoryEngine) -> None:
    mid = fill(engine, "alice")
    engine.forget(mid, owner="alice")
    assert engine.list(owner="alice", status=Status.FORGOTTEN)
    assert engine.purge(mid, owner="alice") == 1
    assert engine.list(owner="alice", status=Status.FORGOTTEN) == []


def test_purge_of_another_owners_id_is_not_found(engine: MemoryEngine) -> None:
    mid = fill(engine, "alice")
    with pytest.raises(NotFound):
        engine.purge(mid, owner="bob")
    assert engine.get(mid, owner="alice")


def test_purge_an_owner(engine: MemoryEngine) -> None:
    fill(engine, "alice")
    kept = fill(engine, "bob")
    assert engine.purge(None, owner="alice") == 2
    assert engine.list(owner="alice") == [] and engine.dedup_log(owner="alice") == []
    assert engine.session("chat", owner="alice").turn == 0
    assert engine.get(kept, owner="bob")


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_sqlite_files_no_longer_hold_the_text(store_backend: Backend) -> None:
    env = store_backend.child_env()
    engine = store_backend.engine()
    for n in range(40):  # enough rows for the saved search indexes
        engine.add(f"filler memory number {n} about gardening", owner="alice")
    mid = fill(engine, "alice")
    engine.search(MARK, owner="alice")
    engine.close()
    home = store_backend.home
    assert files_holding(home, MARK.encode()), "the text should be on disk before the purge"
    runner = CliRunner()
    refused = runner.invoke(app, ["purge", "--owner", "nobody"], env=env)
    assert refused.exit_code == 2 and "--yes" in refused.output
    purged = runner.invoke(app, ["forget", "--purge", mid, "--owner", "alice", "--json"], env=env)
    assert purged.exit_code == 0, purged.output
    assert files_holding(home, MARK.encode()) == []
    listed = runner.invoke(app, ["list", "--owner", "alice", "--json"], env=env)
    assert MARK not in listed.output and "gardening" in listed.output


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_purge_owner_from_the_cli_leaves_no_bytes(store_backend: Backend) -> None:
    env = store_backend.child_env()
    engine = store_backend.engine()
    fill(engine, "alice")
    fill(engine, "bob")
    engine.close()
    result = CliRunner().invoke(app, ["purge", "--owner", "alice", "--yes", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert '"purged": 2' in result.output
    # bob's memories hold the mark too: only alice's are gone
    again = store_backend.engine()
    assert again.list(owner="alice") == [] and len(again.list(owner="bob")) == 2


def test_delete_with_purge_over_http(store_backend: Backend) -> None:
    with serve_app(store_backend) as (client, _):
        added = client.post("/v1/memories", json={"memory": {"content": f"the {MARK} jar"}})
        mid = added.json()["results"][0]["memory"]["id"]
        resp = client.delete(f"/v1/memories/{mid}", params={"purge": "true"})
        assert resp.status_code == 200 and resp.json()["id"] == mid
        assert client.get(f"/v1/memories/{mid}").status_code == 404
        assert client.get("/v1/memories", params={"status": "forgotten"}).json()["items"] == []
        assert client.delete(f"/v1/memories/{mid}", params={"purge": "true"}).status_code == 404


def test_another_process_caches_forget_a_purged_memory(store_backend: Backend) -> None:
    """Issue #33: a purge by one process reaches another's search caches (its purge mark in
    the change feed): they no longer hold the row, and count only the rows left."""
    ours, theirs = store_backend.engine(), store_backend.engine()
    for n in range(5):
        ours.add(f"filler memory number {n} about gardening", owner="alice")
    mid = fill(ours, "alice")
    assert theirs.search(MARK, owner="alice")[0].memory.id == mid  # their caches hold it
    cache = theirs.store.cache
    before = len(cache.text("alice"))
    assert ours.purge(mid, owner="alice") == 1
    assert all(MARK not in h.memory.content for h in theirs.search(MARK, owner="alice"))
    assert len(cache.text("alice")) == before - 1 == len(ours.list(owner="alice"))
    assert not [t for t in cache.text("alice").to_arrays()["terms"].tolist() if MARK[:10] in t]
    # a later write of either process still reaches the other
    added = ours.add("the compost heap needs turning", owner="alice").memory.id
    assert theirs.search("compost heap", owner="alice")[0].memory.id == added


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_a_write_after_purging_the_newest_row_reaches_other_caches(
    store_backend: Backend,
) -> None:
    """SQLite numbered changes on from the highest row left: purging the newest row handed its
    number out again, below another process's watermark, and that process never saw the new
    row. The purge mark keeps the number taken."""
    ours, theirs = store_backend.engine(), store_backend.engine()
    ours.add("the shed key hangs by the door", owner="alice")
    newest = ours.add(f"the {MARK} jar is on the top shelf", owner="alice").memory.id
    assert theirs.search(MARK, owner="alice")[0].memory.id == newest  # watermark: the newest
    assert ours.purge(newest, owner="alice") == 1
    assert len(theirs.store.cache.text("alice")) == 1  # the mark numbered above the row
    added = ours.add("the greenhouse vents open at noon", owner="alice").memory.id
    assert theirs.search("greenhouse vents noon", owner="alice")[0].memory.id == added
