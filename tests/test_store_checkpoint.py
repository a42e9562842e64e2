"""SQLite's write-ahead log is copied back into the database file by the store's checkpoint
thread (memlane.store.sqlite.checkpoint), not by the commit that fills it: the commits of a
small store never reach SQLite's automatic threshold (1,000 log pages), so without the thread
the database file alone would hold none of them."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from conftest import Backend
from memlane import HashEmbedder, MemoryType
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.embeddings import embed_texts
from memlane.store import NewMemory
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite.checkpoint import Checkpointer

EMB = HashEmbedder()


def _add(store: SQLiteStore, text: str) -> str:
    memory = NewMemory(
        new_id(), text, content_hash(text), MemoryType.FACT, 0.5, "default", None, None, None,
        utcnow(),
    )  # fmt: skip
    with store.transaction():
        return store.insert(memory, embed_texts(EMB, [text])[0]).id


def _ids_in_the_file_alone(path: Path, folder: Path) -> set[str]:
    """The memory ids the database file holds without its log (a copy of the file only)."""
    copy = folder / "alone.db"
    shutil.copyfile(path, copy)
    conn = sqlite3.connect(copy)
    try:
        return {str(r[0]) for r in conn.execute("SELECT id FROM memories")}
    finally:
        conn.close()


def test_commits_reach_the_database_file_without_a_commit_checkpointing(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    store = sqlite_backend.open_store(EMB)
    assert isinstance(store, SQLiteStore)
    checkpointer = store.db.checkpointer
    checkpointer.every = 1  # a checkpoint after every commit (the default waits for 8)
    ids = [_add(store, f"memory number {i} about kites") for i in range(3)]
    assert checkpointer.wait(timeout=60)
    assert checkpointer.checkpoints >= 1
    assert _ids_in_the_file_alone(store.db.path, tmp_path) == set(ids)
    # the log is not emptied by the copy: the store still reads every memory through it
    assert set(store.get_many("default", ids)) == set(ids)
    assert checkpointer.running
    store.close()
    assert not checkpointer.running  # stopped with the store


def test_a_small_store_starts_no_thread(sqlite_backend: Backend) -> None:
    """The thread starts after :data:`CHECKPOINT_EVERY` commits only (a hook or a CLI call that
    commits once or twice starts none)."""
    sqlite_backend.open_store(EMB).close()  # created (its migrations commit one by one)
    store = sqlite_backend.open_store(EMB)
    assert isinstance(store, SQLiteStore)
    _add(store, "one memory")
    _add(store, "another memory")
    assert not store.db.checkpointer.running
    assert store.db.checkpointer.checkpoints == 0


def test_a_thread_that_cannot_start_fails_no_write(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpointer is told of a commit after the ``COMMIT``: a process out of threads
    (``RuntimeError: can't start new thread``) must not turn a write that landed into an error;
    the commits then checkpoint by themselves, as without the thread."""
    store = sqlite_backend.open_store(EMB)
    assert isinstance(store, SQLiteStore)
    store.db.checkpointer.close()  # opening may have started one (migrations commit one by one)
    store.db.checkpointer = Checkpointer(store.db.path, every=1)

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    ids = [_add(store, f"memory {i} about sailing") for i in range(3)]
    monkeypatch.undo()
    assert set(store.get_many("default", ids)) == set(ids)
    assert not store.db.checkpointer.running
    store.close()
    reopened = sqlite_backend.open_store(EMB)
    assert set(reopened.get_many("default", ids)) == set(ids)
    reopened.close()
