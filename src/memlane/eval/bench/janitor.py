"""``memlane bench janitor``: the janitor on a store of N synthetic memories with duplicates that
slipped past the write path.

The store is built straight through the store contract (no write-path dedup): the bench
generator's stream (:class:`~memlane.eval.bench.generator.Generator`) with its near-repeats
(exact repeats, other punctuation, an added detail, another phrasing, a changed number: 10 % of
the stream by default), embedded with the deterministic hash embedder (the janitor itself embeds
nothing unless a model writes a merged text, so its time does not depend on the embedding model;
building 100,000 memories with the real model would take ~8 minutes). The indexes are built and
saved, the store closed; then ``memlane janitor --json`` runs in a child process, so its time
includes start-up and loading the saved indexes, and its peak memory is that process's own
(``ru_maxrss`` of the child). A second run checks that nothing new is found.

With ``[llm]`` configured (``MEMLANE_LLM__*``), the child asks that model: ``llm_calls`` and
``llm_calls_per_1000`` are then its calls; without one, ``llm_calls_if_configured`` is how many
calls a model would get (one per cluster of at most
:data:`~memlane.dedup.janitor.MAX_CLUSTER` members).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlane.eval.bench.generator import Generator

#: Owner of the bench's memories.
OWNER = "bench"
#: Rows per insert transaction while building.
_CHUNK = 5000


def build_janitor_store(
    home: Path,
    n: int,
    *,
    seed: int = 0,
    near_repeats: float = 0.1,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Insert the first ``n`` memories of the seeded stream into a new store in ``home`` (hash
    embedder, no dedup), build and save its indexes; returns what was planted and the seconds."""
    from memlane import HashEmbedder, Settings
    from memlane._ids import new_id, utcnow
    from memlane._text import content_hash
    from memlane.store import open_store
    from memlane.store.base import NewMemory
    from memlane.types import MemoryType

    started = time.perf_counter()
    (home / "memlane.toml").write_text('[embedding]\nprovider = "hash"\n', encoding="utf-8")
    settings = Settings.load(home)
    embedder = HashEmbedder()
    store = open_store(settings, embedder)
    kinds: Counter[str] = Counter()
    try:
        gen = Generator(seed, near_repeats=near_repeats)
        for start in range(0, n, _CHUNK):
            chunk = gen.memories(min(_CHUNK, n - start), start)
            vectors = embedder.embed_batch([m.content for m in chunk])
            vectors /= (vectors**2).sum(axis=1, keepdims=True) ** 0.5 + 1e-12
            with store.transaction():
                for m, vec in zip(chunk, vectors, strict=True):
                    kinds[m.kind] += 1
                    draft = NewMemory(
                        new_id(),
                        m.content,
                        content_hash(m.content),
                        MemoryType(m.type),
                        0.5,
                        OWNER,
                        None,
                        None,
                        "bench",
                        utcnow(),
                    )
                    store.insert(draft, vec)
            if progress is not None:
                progress(start + len(chunk))
        # build both indexes now (saved on close), as a running store has them
        store.vector_search(OWNER, None, vectors[0], 1)
        store.fts_search(OWNER, None, "warm up the index", 1)
    finally:
        store.close()
    return {"planted": dict(sorted(kinds.items())), "build_seconds": time.perf_counter() - started}


def _janitor_child(home: Path) -> tuple[dict[str, Any], float]:
    """Run ``memlane janitor --json`` on ``home`` in a child; its report and wall seconds."""
    env = {**os.environ, "MEMLANE_EMBEDDING__PROVIDER": "hash"}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "memlane", "janitor", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"memlane janitor failed (exit {proc.returncode}): {proc.stderr}")
    return json.loads(proc.stdout), wall


def run_janitor(
    n: int,
    *,
    home: Path,
    seed: int = 0,
    near_repeats: float = 0.1,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Build the store of ``n`` memories in ``home`` (new or empty), run the janitor twice in a
    child process; the figures (see the module doc)."""
    from memlane.dedup.janitor import MAX_CLUSTER

    built = build_janitor_store(home, n, seed=seed, near_repeats=near_repeats, progress=progress)
    first, wall = _janitor_child(home)
    # ru_maxrss: KiB on Linux, the largest of the children waited for (the first run here);
    # CPU seconds (user + system) of that child: less sensitive than wall time to other jobs
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kb = usage.ru_maxrss
    cpu = usage.ru_utime + usage.ru_stime
    second, second_wall = _janitor_child(home)
    askable = sum(
        1
        for p in first["plans"]
        if p["outcome"] != "too_large" and len(p["members"]) <= MAX_CLUSTER
    )
    return {
        "bench": "janitor",
        "memories": n,
        "seed": seed,
        "embedder": "hash-384",
        "planted": built["planted"],
        "build_seconds": round(built["build_seconds"], 2),
        "seconds": first["seconds"],
        "phase_seconds": first["phase_seconds"],
        "process_seconds": round(wall, 2),
        "process_cpu_seconds": round(cpu, 2),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "candidate_pairs": first["candidate_pairs"],
        "candidate_pairs_per_memory": first["candidate_pairs_per_memory"],
        "pairs": first["pairs"],
        "by_source": first["by_source"],
        "clusters": first["clusters"],
        "merged": first["merged"],
        "absorbed": first["absorbed"],
        "skipped": first["skipped"],
        "llm_calls": first["llm_calls"],
        "llm_failures": first["llm_failures"],
        "llm_calls_per_1000": round(first["llm_calls"] * 1000 / n, 2),
        "llm_calls_if_configured": askable,
        "llm_calls_if_configured_per_1000": round(askable * 1000 / n, 2),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "second_run": {
            "seconds": second["seconds"],
            "process_seconds": round(second_wall, 2),
            "merged": second["merged"],
            "clusters": second["clusters"],
            "skipped": second["skipped"],
        },
    }
