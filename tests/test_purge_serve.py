"""Purge means gone, whatever runs (issue #33): a purge through ``memlane serve --workers 2``
(``DELETE /v1/memories/{id}?purge=true``) and a CLI ``purge --owner`` while that server runs
leave no byte of the purged memories in any file of the home once the server has stopped, on
both backends.

Before: each worker keeps its own search caches (BM25 and vector indexes) and saves them at
stop (memlane.store.index_cache); a hard delete never reached the other worker's caches, nor
the server's for a CLI purge, so the stop wrote the purged memories' terms and vectors back to
``memlane.db.vec/``. Now every purge leaves a mark in the change feed (the caches rebuild from
the rows left) and a save checks its rows against the store (docs/security.md, "Purge").

The owners hold more than ``PERSIST_MIN_ROWS`` memories, so that their indexes are saved at
stop at all (smaller ones are rebuilt, never saved); the test checks that the home does hold
saved indexes afterwards (of the memories left), so a scan that finds nothing means something.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import Backend
from memlane import HashEmbedder, MemoryType
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.embeddings import embed_texts
from memlane.store import NewMemory
from memlane.store.index_cache import PERSIST_MIN_ROWS
from test_serve_workers import WAIT_S, call, serve

#: Words that appear only in the purged memories (what the scan looks for; BM25 keeps stems,
#: so the scan looks for the first letters, which every stem of the word keeps).
ALICE_MARK, BOB_MARK = "wallabyzest", "numbatfudge"
FILLER_WORD = "parsnip"


def fill(backend: Backend, owner: str, extra: list[str]) -> dict[str, bytes]:
    """Insert ``PERSIST_MIN_ROWS + 50`` filler memories of ``owner`` and the ``extra`` texts
    (as stored: no dedup); ``{id: embedding bytes}`` of the extra ones."""
    emb = HashEmbedder()
    engine = backend.engine(embedder=emb)
    texts = [f"{FILLER_WORD} note {n} about bed {n % 89}" for n in range(PERSIST_MIN_ROWS + 50)]
    texts += extra
    vectors = embed_texts(emb, texts)
    marked: dict[str, bytes] = {}
    with engine.store.transaction():
        for text, vector in zip(texts, vectors, strict=True):
            memory = engine.store.insert(
                NewMemory(new_id(), text, content_hash(text), MemoryType.FACT, 0.5, owner,
                          None, None, None, utcnow()),
                vector,
            )  # fmt: skip
            if text in extra:
                marked[memory.id] = np.asarray(vector, dtype=np.float32).tobytes()
    engine.close()
    return marked


def holding(home: Path, needles: dict[str, bytes]) -> list[str]:
    """``name in path`` for every needle found in a file under ``home``."""
    found = []
    for path in sorted(home.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [
                f"{name} in {path.relative_to(home)}" for name, b in needles.items() if b in data
            ]
    return found


def word_forms(word: str) -> dict[str, bytes]:
    """A word's first 8 letters as UTF-8 and as numpy's UTF-32 strings (the BM25 file)."""
    stem = word[:8]
    return {f"{word} (utf-8)": stem.encode(), f"{word} (utf-32)": stem.encode("utf-32-le")}


def test_purges_through_a_two_worker_server_leave_no_bytes(store_backend: Backend) -> None:
    home = store_backend.home
    alice = fill(store_backend, "alice", [f"the {ALICE_MARK} vault code is under the mat"])
    bob = fill(store_backend, "bob", [f"bob keeps the {BOB_MARK} recipe in the red tin",
                                      f"the {BOB_MARK} needs two spoons of salt"])  # fmt: skip
    [alice_id] = alice
    needles = {**word_forms(ALICE_MARK), **word_forms(BOB_MARK)}
    needles.update({f"vector of {mid}": vec for mid, vec in {**alice, **bob}.items()})

    with serve(store_backend, "--workers", "2") as server:
        a, b = server.two_workers()
        for conn in (a, b):  # both workers build both owners' indexes (the marks included)
            for owner, word in (("alice", ALICE_MARK), ("bob", BOB_MARK)):
                hits = call(conn, "POST", "/v1/search", {"query": word, "owner": owner})["hits"]
                assert word in hits[0]["memory"]["content"]
        # worker a purges alice's memory; worker b searches after it (its caches catch up)
        call(a, "DELETE", f"/v1/memories/{alice_id}?owner=alice&purge=true")
        after = call(b, "POST", "/v1/search", {"query": ALICE_MARK, "owner": "alice"})["hits"]
        assert alice_id not in [hit["memory"]["id"] for hit in after]
        assert call(b, "POST", "/v1/search", {"query": f"{FILLER_WORD} bed 7", "owner": "alice"})[
            "hits"
        ]  # b's alice index is rebuilt, not just emptied
        # a CLI purge of bob while the server runs; no worker searches bob again before stop
        cli = subprocess.run(
            [sys.executable, "-m", "memlane", "purge", "--owner", "bob", "--yes", "--json"],
            env=store_backend.child_env(),
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        assert cli.returncode == 0 and '"purged": 2052' in cli.stdout, cli.stdout + cli.stderr
        a.close()
        b.close()
        os.kill(server.proc.pid, signal.SIGTERM)  # the workers close their engines: caches saved
        assert server.proc.wait(timeout=WAIT_S) == 0, server.log.read_text()[-2000:]
        assert "stopped, store closed (2 workers)" in server.log.read_text()

    assert holding(home, needles) == []
    if store_backend.name == "sqlite":  # the caches were saved: alice's, of the rows left
        saved = [p.name for p in (home / "memlane.db.vec").iterdir()]
        assert any(name.endswith(".bm25.npz") for name in saved), saved
        assert holding(home / "memlane.db.vec", word_forms(FILLER_WORD))
    # and the store answers as it should once started again
    engine = store_backend.engine()
    assert all(
        ALICE_MARK not in hit.memory.content for hit in engine.search(ALICE_MARK, owner="alice")
    )
    assert engine.list(owner="bob") == []
    assert len(engine.search(f"{FILLER_WORD} bed 7", owner="alice")) > 0
