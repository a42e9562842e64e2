"""Two and four processes adding to and searching one store at the same moment (test_concurrency
covers two writers of distinct texts; here some texts are shared by every process, so the exact
duplicate check races): no lock error reaches a caller, nothing is lost, nothing is stored twice,
and afterwards vector search finds every memory by its own text."""

from __future__ import annotations

import sqlite3
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import Backend
from test_concurrency import run_together

WORKER = textwrap.dedent(
    """
    import json, random, sys, time
    from pathlib import Path
    from memlane import MemoryEngine

    name, own, shared, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    texts = [f"{name} private note {i}: the {name} team met about item {i * 31}" for i in range(own)]
    texts += [f"shared note {i}: everyone agrees on plan number {i * 17}" for i in range(shared)]
    random.Random(name).shuffle(texts)
    (go.parent / f"ready-{name}").touch()
    while not go.exists():  # start together
        time.sleep(0.005)
    started = time.time()
    decisions, searched = [], 0
    with MemoryEngine.open() as engine:
        for i, text in enumerate(texts):
            decisions.append(engine.add(text).decision.value)
            if i % 3 == 0:
                engine.search(text, limit=5)
                searched += 1
    print(json.dumps({"decisions": decisions, "searched": searched,
                      "started": started, "ended": time.time()}))
    """
)


@pytest.mark.parametrize(("processes", "own", "shared"), [(2, 150, 50), (4, 100, 50)])
def test_processes_add_and_search_one_store_at_once(
    store_backend: Backend, processes: int, own: int, shared: int
) -> None:
    store_backend.engine().close()  # the store exists; test_concurrency covers a fresh one
    names = [f"p{i}" for i in range(processes)]
    started = time.monotonic()
    reports = run_together(
        store_backend,
        WORKER,
        {name: [str(own), str(shared)] for name in names},
        store_backend.home / "go",
    )  # asserts exit 0 and no "locked"/"busy" on stderr
    elapsed = time.monotonic() - started
    assert all(r["started"] < min(o["ended"] for o in reports) for r in reports)  # overlapped
    decisions = Counter(d for r in reports for d in r["decisions"])
    expected = processes * own + shared
    print(f"{processes} processes, {processes * (own + shared)} adds, {elapsed:.1f} s: {decisions}")
    # each shared text is stored once; the other processes' adds of it are exact duplicates
    assert decisions["hash_exact"] == (processes - 1) * shared, decisions

    engine = store_backend.engine()
    memories = engine.list(limit=10_000)
    assert engine.count() == len(memories) == expected
    assert len({m.content for m in memories}) == expected
    hashes = Counter((m.owner, m.agent, m.content_hash) for m in memories)
    assert max(hashes.values()) == 1
    for m in memories:
        hits = engine.search(m.content, mode="vector", limit=1)
        assert [h.memory.id for h in hits] == [m.id], m.content
    if store_backend.name == "sqlite":
        conn = sqlite3.connect(Path(store_backend.store_settings()["path"]))
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            conn.close()
