"""Search inside a project against search without one (issue #22: the project filter's cost).

Builds a store of N synthetic memories of one owner (``memlane bench``'s generator, the write
path with dedup on): one in five global, the others spread over ``--projects`` projects. Then
times the same questions searched with ``project=`` the first project and without a project,
interleaved query by query in one process (the query embeddings computed before the clock
starts, so the figures are the search's own work: both legs, the rows, fusion), and checks that
every hit of a project search is of that project or global.

    python scripts/bench_project_search.py build HOME --memories 3000 [--backend postgres --dsn DSN]
    python scripts/bench_project_search.py time HOME [--queries 300] [--json]

To compare two checkouts, build once, copy the home (``cp -r``; a PostgreSQL store: one database
each), and run ``time`` alternately with each checkout's ``src`` first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from memlane import MemoryEngine
from memlane.dedup.write import MemoryInput
from memlane.eval.bench.generator import Generator
from memlane.eval.timing import percentile

OWNER = "bench"


def project_of(i: int, projects: int) -> str | None:
    """Memory ``i``'s project: every fifth global, the others round-robin over ``projects``."""
    return None if i % 5 == 0 else f"repo-{i % projects}"


def build(home: Path, n: int, projects: int, backend: str, dsn: str | None) -> None:
    home.mkdir(parents=True, exist_ok=True)
    if backend == "postgres":
        (home / "memlane.toml").write_text(
            f'[store]\nbackend = "postgres"\ndsn = "{dsn}"\n', encoding="utf-8"
        )
    generator = Generator(0)
    with MemoryEngine.open(home) as engine:
        for start in range(0, n, 256):
            batch = generator.memories(min(256, n - start), start)
            engine.add_many(
                MemoryInput(m.content, m.type, OWNER, project=project_of(start + j, projects))
                for j, m in enumerate(batch)
            )
        print(f"{engine.count(OWNER)} memories stored in {home}")
    (home / "bench_project.json").write_text(
        json.dumps({"memories": n, "projects": projects}), encoding="utf-8"
    )


def run(home: Path, queries: int, limit: int) -> dict[str, Any]:
    meta = json.loads((home / "bench_project.json").read_text(encoding="utf-8"))
    project = "repo-1"
    texts = [q.text for q in Generator(1).queries(queries + 20, meta["memories"])]
    with MemoryEngine.open(home) as engine:
        for text in texts:  # the query embeddings are cached: the clock times the search
            engine.embed_query(text)
        for text in texts[:20]:  # warm-up: indexes loaded and caught up
            engine.search(text, owner=OWNER, limit=limit)
            engine.search(text, owner=OWNER, limit=limit, project=project)
        took: dict[str, list[float]] = {"global": [], "project": []}
        outside = 0
        for i, text in enumerate(texts[20:]):
            order = ("global", "project") if i % 2 else ("project", "global")
            for kind in order:
                where = project if kind == "project" else None
                t0 = time.perf_counter()
                hits = engine.search(text, owner=OWNER, limit=limit, project=where)
                took[kind].append((time.perf_counter() - t0) * 1000.0)
                if where is not None:
                    outside += sum(h.memory.project not in (None, project) for h in hits)
    g, p = took["global"], took["project"]
    return {
        "memories": meta["memories"],
        "projects": meta["projects"],
        "queries": len(g),
        "global_p50_ms": round(percentile(g, 50), 3),
        "global_p95_ms": round(percentile(g, 95), 3),
        "project_p50_ms": round(percentile(p, 50), 3),
        "project_p95_ms": round(percentile(p, 95), 3),
        "ratio_p50": round(statistics.median(p) / statistics.median(g), 3),
        "hits_outside_the_project": outside,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("home", type=Path)
    b.add_argument("--memories", type=int, default=3000)
    b.add_argument("--projects", type=int, default=10)
    b.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    b.add_argument("--dsn")
    t = sub.add_parser("time")
    t.add_argument("home", type=Path)
    t.add_argument("--queries", type=int, default=300)
    t.add_argument("--limit", type=int, default=10)
    t.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.command == "build":
        build(args.home, args.memories, args.projects, args.backend, args.dsn)
        return
    out = run(args.home, args.queries, args.limit)
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
