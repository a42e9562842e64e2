"""The three timed runs behind ``memlane bench add|search|inject``; each returns the JSON-ready
dict the command prints (keys in docs/benchmarks.md)."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memlane.eval.bench.generator import Generator, Turn
from memlane.eval.bench.store import OWNER, PreparedStore, build, open_engine
from memlane.eval.timing import Timed, latency_summary, percentile, time_calls

T = TypeVar("T")
R = TypeVar("R")


def run_add(
    n: int,
    *,
    home: Path,
    seed: int = 0,
    batch: int = 256,
    singles: int = 200,
    warmup: int = 5,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Build a store of ``n`` memories in ``home`` (batched, dedup on), then time ``singles``
    single adds of the next memories of the stream (after ``warmup`` untimed ones)."""
    generator = Generator(seed)
    engine, timer = open_engine(home)
    with engine:
        stats = build(engine, generator, n, batch=batch, timer=timer, progress=progress)
        extra = generator.memories(warmup + singles, n)
        run = time_calls(
            timer,
            extra[:warmup],
            extra[warmup:],
            lambda m: engine.add(m.content, type=m.type, owner=OWNER, source="bench"),
        )
        stored = engine.count(OWNER)
    single_decisions = Counter(r.decision.value for r in run.results)
    return {
        "bench": "add",
        "memories": n,
        "seed": seed,
        "batch": batch,
        "embedder": timer.name,
        "batch_per_second": round(n / stats.seconds, 2) if stats.seconds else 0.0,
        "build_seconds": round(stats.seconds, 3),
        "embed_seconds": round(stats.embed_seconds, 3),
        "embed_share": round(stats.embed_seconds / stats.seconds, 4) if stats.seconds else 0.0,
        "decisions": dict(sorted(stats.decisions.items())),
        "stored": stored,
        "singles": len(run.ms),
        "single_warmup": warmup,
        **latency_summary(run.ms, "single_"),
        "single_embed_share": run.embed_share,
        "single_decisions": dict(sorted(single_decisions.items())),
    }


def _time_on_store(
    prepared: PreparedStore,
    seed: int,
    warmup: Sequence[T],
    timed: Sequence[T],
    call: Callable[[Any, T], R],
) -> tuple[Timed[R], dict[str, Any], dict[str, Any]]:
    """Open the prepared store and time ``call(engine, item)`` (see :func:`time_calls`).

    Returns the timing and the keys every search/inject report starts and ends with."""
    engine, timer = open_engine(prepared.home, prepared.embedder)
    with engine:
        run = time_calls(timer, warmup, timed, lambda item: call(engine, item))
        stored = engine.count(OWNER)
    head = {
        "memories": prepared.build.memories,
        "stored": stored,
        "seed": seed,
        "embedder": timer.name,
        "queries": len(run.ms),
    }
    tail = {
        "warmup_queries": len(warmup),
        "warmup_seconds": round(run.warmup_seconds, 3),
        "build_seconds": round(prepared.build.seconds, 3),
        "build_reused": prepared.reused,
    }
    return run, head, tail


def _found(target: str | None, contents: Sequence[str]) -> bool:
    if target is None:
        return False
    key = target.rstrip(".").casefold()
    return any(c.casefold().startswith(key) for c in contents)


def run_search(
    prepared: PreparedStore,
    *,
    seed: int = 0,
    queries: int = 200,
    warmup: int = 20,
    limit: int = 10,
) -> dict[str, Any]:
    """Time ``queries`` hybrid searches (hits and misses) on a prepared store, after ``warmup``
    untimed ones (model load, index load and first queries)."""
    qs = Generator(seed).queries(warmup + queries, prepared.build.memories)
    run, head, tail = _time_on_store(
        prepared,
        seed,
        qs[:warmup],
        qs[warmup:],
        lambda engine, q: engine.search(q.text, owner=OWNER, limit=limit),
    )
    timed = list(zip(qs[warmup:], run.ms, run.results, strict=True))
    hit_ms = [ms for q, ms, _ in timed if q.hit]
    miss_ms = [ms for q, ms, _ in timed if not q.hit]
    found = sum(
        1 for q, _, hits in timed if q.hit and _found(q.target, [h.memory.content for h in hits])
    )
    return {
        "bench": "search",
        **head,
        "hit_queries": len(hit_ms),
        "miss_queries": len(miss_ms),
        "limit": limit,
        **latency_summary(run.ms),
        "hit_p50_ms": round(percentile(hit_ms, 50), 3),
        "miss_p50_ms": round(percentile(miss_ms, 50), 3),
        "embed_share": run.embed_share,
        "recall_at_limit": round(found / len(hit_ms), 4) if hit_ms else 0.0,
        **tail,
    }


def run_inject(
    prepared: PreparedStore,
    *,
    seed: int = 0,
    queries: int = 200,
    sessions: int = 8,
    warmup: int = 20,
) -> dict[str, Any]:
    """Time ``queries`` injection turns over ``sessions`` sessions (each turn with the session's
    two previous messages as ``recent``), after ``warmup`` untimed turns in other sessions."""
    turns = Generator(seed).conversation(
        warmup + queries, prepared.build.memories, sessions=sessions
    )
    run_tag = f"bench-{os.getpid()}-{time.time_ns()}"

    def inject(engine: Any, item: tuple[str, Turn]) -> Any:
        session, turn = item
        return engine.inject(session, turn.text, owner=OWNER, recent=list(turn.recent))

    run, head, tail = _time_on_store(
        prepared,
        seed,
        [(f"{run_tag}:warmup", t) for t in turns[:warmup]],
        [(f"{run_tag}:{t.session}", t) for t in turns[warmup:]],
        inject,
    )
    skipped: Counter[str] = Counter()
    for result in run.results:
        skipped.update(result.skipped)
    return {
        "bench": "inject",
        **head,
        "sessions": sessions,
        **latency_summary(run.ms),
        "embed_share": run.embed_share,
        "items_per_turn": (
            round(sum(len(r.items) for r in run.results) / len(run.ms), 3) if run.ms else 0.0
        ),
        "turns_with_block": sum(1 for r in run.results if r.block is not None),
        "skipped": dict(sorted(skipped.items())),
        **tail,
    }
