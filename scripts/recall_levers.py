"""Measure retrieval levers on the LoCoMo dev questions, tuning on some conversations and checking
on others (docs/replay.md, "The recall push").

    python scripts/recall_levers.py ../shared/data/locomo/locomo_dev.json --model all-MiniLM-L6-v2 \
        --out levers-minilm.json

Stores every observation of every conversation through the write path (as ``memlane replay``
does by the questions), then, per question, records the two search legs (vector: top 30 with
cosines; full text: top 30) once. The fusion variants are then computed from those rankings in
Python, the same formula as :mod:`memlane.retrieval` (reciprocal rank fusion with per-leg weights,
the relevance floor, the tie-break left out), so dozens of variants cost seconds. Prints
hybrid evidence recall@10 per variant on the tune and the check conversations.
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memlane import MemoryEngine, Settings
from memlane.engine import MemoryInput
from memlane.eval.replay.locomo import load_locomo, normalise_evidence
from memlane.types import MemoryType

DEPTH = 30


@dataclass
class Question:
    conv: int
    category: int
    wanted: set[str]
    vector: list[tuple[str, float]]  # (memory id, cosine), best first
    fts: list[str]
    cosine: dict[str, float]  # to every memory of the conversation
    text: str = ""


def record_memories(
    engine: MemoryEngine,
    owner: str,
    memories: dict[str, Any],
    evidence: Callable[[object], list[str]] = normalise_evidence,
) -> tuple[list[str], np.ndarray]:
    """Record ``owner``'s active memories in ``memories`` (id -> evidence ids, session, position
    in its session, creation time, text, role, words), in creation order; returns their ids and
    their embeddings as a matrix (one row per id), for the cosine of a question to every memory."""
    rows = engine.list(owner=owner, limit=100_000)
    rows.sort(key=lambda m: (m.created_at, m.id))
    position: dict[str, int] = {}
    for m in rows:
        position[m.session or ""] = position.get(m.session or "", -1) + 1
        memories[m.id] = {
            "evidence": evidence(m.metadata.get("evidence")),
            "session": m.session,
            "pos": position[m.session or ""],
            "created": m.created_at.isoformat(),
            "role": m.metadata.get("role", "user"),
            "words": len(m.content.split()),
            "text": m.content,
        }
    ids = [m.id for m in rows]
    emb = engine.store.embeddings(owner, ids)
    return ids, np.stack([emb[i] for i in ids])


def sessions_of(memories: dict[str, Any]) -> dict[str, list[str]]:
    """Session -> its memory ids in the order they were written (the neighbour leg's rows)."""
    by_session: dict[str, list[str]] = {}
    for mid, m in sorted(memories.items(), key=lambda kv: (kv[1]["session"], kv[1]["pos"])):
        by_session.setdefault(m["session"], []).append(mid)
    return by_session


def expand_neighbours(
    scores: dict[str, float],
    memories: dict[str, Any],
    by_session: dict[str, list[str]],
    seeds: int,
    weight: float,
    window: int = 1,
) -> None:
    """The neighbour leg of :mod:`memlane.retrieval`, in place: the memories within ``window``
    of each of the top ``seeds`` fused hits in its session, not yet candidates, scored
    ``weight`` times that hit's score (the best seed's)."""
    if not seeds or weight <= 0:
        return
    extra: dict[str, float] = {}
    for s in sorted(scores, key=scores.__getitem__, reverse=True)[:seeds]:
        m = memories[s]
        row = by_session[m["session"]]
        for d in range(1, window + 1):
            for p in (m["pos"] - d, m["pos"] + d):
                if 0 <= p < len(row) and row[p] not in scores:
                    extra[row[p]] = max(extra.get(row[p], 0.0), weight * scores[s])
    scores.update(extra)


def above_floor(
    scores: dict[str, float],
    cosine: dict[str, float],
    best: float,
    floor_rel: float,
    floor_abs: float,
    limit: int,
) -> list[str]:
    """The relevance floor (``max(best * floor_rel, floor_abs)`` on cosine), then the top
    ``limit`` ids by fused score (ties kept in candidate order)."""
    floor = max(best * floor_rel, floor_abs)
    kept = [m for m in scores if cosine[m] >= floor]
    kept.sort(key=scores.__getitem__, reverse=True)
    return kept[:limit]


def covered(wanted: set[str], ids: Iterable[str], memories: dict[str, Any]) -> float:
    """Evidence recall of one question: the share of ``wanted`` cited by the memories ``ids``."""
    found: set[str] = set()
    for mid in ids:
        found |= wanted.intersection(memories[mid]["evidence"])
    return len(found) / len(wanted)


#: Retrieval settings measured through the real search (graph leg included) with --real.
REAL_VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "neighbour leg off": {"neighbour_seeds": 0},
    "neighbour leg off, graph leg off": {"neighbour_seeds": 0, "graph_weight": 0.0},
    "graph leg off": {"graph_weight": 0.0},
    "neighbours of top 5": {"neighbour_seeds": 5},
    "neighbour weight 0.49": {"neighbour_weight": 0.49},
    "neighbour weight 0.49, graph off": {"neighbour_weight": 0.49, "graph_weight": 0.0},
    "fts weight 1.05": {"fts_weight": 1.05},
}


def real_recall(engine: MemoryEngine, convs: list[Any], tune: set[int]) -> list[dict[str, Any]]:
    """Hybrid recall@10 of each of :data:`REAL_VARIANTS` through :class:`memlane.retrieval.
    Retriever` on the store built (the same store: only the search changes)."""
    from memlane.retrieval import Retriever

    rows = []
    for name, over in REAL_VARIANTS.items():
        cfg = engine.settings.retrieval.model_copy(update=over)
        retriever = Retriever(engine.store, engine.embeddings, cfg)
        split: dict[str, list[float]] = {"tune": [], "check": []}
        ms: list[float] = []
        for n, conv in enumerate(convs):
            for q in conv.questions:
                t0 = time.perf_counter()
                hits = retriever.search(q.text, owner=conv.sample_id, limit=10, record_access=False)
                ms.append((time.perf_counter() - t0) * 1000)
                found: set[str] = set()
                for h in hits:
                    found |= set(q.evidence) & set(
                        normalise_evidence(h.memory.metadata.get("evidence"))
                    )
                split["tune" if n in tune else "check"].append(len(found) / len(q.evidence))
        ms.sort()
        row = {
            "variant": name,
            "tune": sum(split["tune"]) / len(split["tune"]),
            "check": sum(split["check"]) / len(split["check"]),
            "search_p50_ms": ms[len(ms) // 2],
            "search_p95_ms": ms[int(len(ms) * 0.95)],
        }
        print(
            f"real: {name:<38} tune {row['tune']:.4f}  check {row['check']:.4f}  "
            f"p50 {row['search_p50_ms']:.2f} ms  p95 {row['search_p95_ms']:.2f} ms",
            flush=True,
        )
        rows.append(row)
    return rows


def collect(
    path: Path, model: str, real_tune: set[int] | None = None
) -> tuple[list[Question], dict[str, Any], float]:
    """Build the store with ``model``; the legs of every question; per memory: evidence, session
    and position in its session; the median query-embedding time in ms."""
    convs = load_locomo(path)
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.load(home, embedding={"provider": "local", "model": model})
        engine = MemoryEngine.open(settings=settings)
        memories: dict[str, Any] = {}
        questions: list[Question] = []
        times: list[float] = []
        try:
            for n, conv in enumerate(convs):
                owner = conv.sample_id
                for number in sorted(conv.observations):
                    items = [
                        MemoryInput(
                            content=o.text,
                            type=MemoryType.OBSERVATION,
                            owner=owner,
                            session=f"{owner}:{number}",
                            metadata={"evidence": list(o.evidence)},
                        )
                        for o in conv.observations[number]
                    ]
                    if items:
                        engine.add_many(items)
                ids, matrix = record_memories(engine, owner, memories)
                for q in conv.questions:
                    t0 = time.perf_counter()
                    qvec = engine.embed_query(q.text)
                    times.append((time.perf_counter() - t0) * 1000)
                    vec = engine.store.vector_search(owner, None, qvec, DEPTH, None)
                    fts = engine.store.fts_search(owner, None, q.text, DEPTH, None)
                    questions.append(
                        Question(
                            n,
                            q.category,
                            set(q.evidence),
                            [(h.id, h.score) for h in vec],
                            [h.id for h in fts],
                            dict(zip(ids, (matrix @ qvec).tolist(), strict=True)),
                            q.text,
                        )
                    )
            if real_tune is not None:
                real_recall(engine, convs, real_tune)
        finally:
            engine.close()
    times.sort()
    return questions, memories, times[len(times) // 2]


def fuse(
    q: Question,
    memories: dict[str, Any],
    by_session: dict[str, list[str]],
    *,
    k: float = 60.0,
    cand: int = 10,
    wv: float = 1.0,
    wf: float = 1.0,
    floor_rel: float = 0.5,
    floor_abs: float = 0.1,
    expand: int = 0,
    expand_weight: float = 0.0,
    expand_window: int = 1,
    limit: int = 10,
    time_weight: float = 0.0,
    time_depth: int = 30,
    time_any: bool = False,
) -> list[str]:
    """The top ``limit`` ids of one variant. The time leg (``time_weight`` > 0): for a question
    about time (:data:`TIME_QUESTION`), the memories among the vector leg's top ``time_depth``
    that state a time (:data:`TIME_EXPRESSION`), in cosine order, as a third RRF leg
    (``time_any``: for every question)."""
    scores: dict[str, float] = {}
    cosine = q.cosine
    for rank, (mid, _) in enumerate(q.vector[:cand], start=1):
        scores[mid] = scores.get(mid, 0.0) + wv / (k + rank)
    for rank, mid in enumerate(q.fts[:cand], start=1):
        scores[mid] = scores.get(mid, 0.0) + wf / (k + rank)
    if time_weight > 0 and (time_any or TIME_QUESTION.search(q.text)):
        timed = [m for m, _ in q.vector[:time_depth] if TIME_EXPRESSION.search(memories[m]["text"])]
        for rank, mid in enumerate(timed[:cand], start=1):
            scores[mid] = scores.get(mid, 0.0) + time_weight / (k + rank)
    expand_neighbours(scores, memories, by_session, expand, expand_weight, expand_window)
    best = max((c for _, c in q.vector), default=0.0)
    return above_floor(scores, cosine, best, floor_rel, floor_abs, limit)


#: A question about time: when, how long, which year/month/day/date, how many years/days ...
TIME_QUESTION = re.compile(
    r"\b(when|how long|what (year|month|day|date|time)|which (year|month|day)|"
    r"how many (years|months|weeks|days)|since)\b",
    re.IGNORECASE,
)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
#: A memory that states a time: a date, a year, a weekday, a relative time.
TIME_EXPRESSION = re.compile(
    rf"\b(({_MONTHS}|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(19|20)\d\d|yesterday|today|tomorrow|tonight|recently|ago|soon|"
    r"(last|next|this|past|coming) (week|weekend|month|year|summer|winter|spring|fall|"
    r"autumn|night|morning|evening|friday|saturday|sunday)|"
    r"\d+ (days?|weeks?|months?|years?)|(a|one|two|three|few|couple of) (days?|weeks?|months?|years?))\b",
    re.IGNORECASE,
)


def recall(
    questions: Iterable[Any],
    memories: dict[str, Any],
    by_session: dict[str, list[str]],
    fuse: Callable[..., list[str]] = fuse,
    **variant: Any,
) -> float:
    """Mean evidence recall of ``fuse``'s top ids (one variant's keyword arguments) over the
    questions (anything with ``wanted``: this script's and fusion_levers.py's)."""
    values = [
        covered(q.wanted, fuse(q, memories, by_session, **variant), memories) for q in questions
    ]
    return sum(values) / len(values) if values else 0.0


VARIANTS: dict[str, dict[str, Any]] = {
    "baseline (defaults, graph leg left out)": {},
    "vector only": {"wf": 0.0},
    "fts only": {"wv": 0.0, "floor_rel": 0.0, "floor_abs": -1.0},
    "weights vector 1.1 / fts 1": {"wv": 1.1},
    "weights vector 1.05 / fts 1": {"wv": 1.05},
    "weights vector 1 / fts 1.05": {"wf": 1.05},
    "weights vector 1 / fts 1.1": {"wf": 1.1},
    "candidates 15": {"cand": 15},
    "candidates 20, k 20": {"cand": 20, "k": 20.0},
    "no floor": {"floor_rel": 0.0, "floor_abs": -1.0},
    "neighbours +-1 of top 3, weight 0.5": {"expand": 3, "expand_weight": 0.5},
    "neighbours +-1 of top 5, weight 0.5": {"expand": 5, "expand_weight": 0.5},
    "neighbours +-1 of top 5, weight 0.8": {"expand": 5, "expand_weight": 0.8},
    "neighbours +-1 of top 5, weight 0.3": {"expand": 5, "expand_weight": 0.3},
    "neighbours +-1 of top 10, weight 0.5": {"expand": 10, "expand_weight": 0.5},
    "neighbours +-1 of top 5, weight 0.4": {"expand": 5, "expand_weight": 0.4},
    "neighbours +-1 of top 5, weight 0.6": {"expand": 5, "expand_weight": 0.6},
    "neighbours +-1 of top 3, weight 0.6": {"expand": 3, "expand_weight": 0.6},
    "neighbours +-1 of top 7, weight 0.5": {"expand": 7, "expand_weight": 0.5},
    "neighbours top 5 w 0.5 + vector 1.05": {"expand": 5, "expand_weight": 0.5, "wv": 1.05},
    "neighbours top 5 w 0.5 + fts 1.05": {"expand": 5, "expand_weight": 0.5, "wf": 1.05},
    "neighbours +-2 of top 3, weight 0.5": {"expand": 3, "expand_weight": 0.5, "expand_window": 2},
    "kept (neighbours +-1 of top 3, weight 0.47)": {"expand": 3, "expand_weight": 0.47},
    **{
        f"kept + time leg w {w}, depth {d}": {
            "expand": 3,
            "expand_weight": 0.47,
            "time_weight": w,
            "time_depth": d,
        }
        for w in (0.25, 0.5, 0.75, 1.0)
        for d in (20, 30)
    },
    "kept + time leg w 0.5, every question": {
        "expand": 3,
        "expand_weight": 0.47,
        "time_weight": 0.5,
        "time_any": True,
    },
    "time leg w 0.5 alone (no neighbours)": {"time_weight": 0.5},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--tune", default="0,1,2,3")
    parser.add_argument("--check", default="4,5,6")
    parser.add_argument("--floor", default="", help="floor_rel,floor_abs of the model's profile")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cache", type=Path, help="pickle of the collected legs (reused)")
    parser.add_argument("--real", action="store_true", help="also the real search's variants")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.cache and args.cache.is_file():
        questions, memories, query_ms = pickle.loads(args.cache.read_bytes())
    else:
        tune_set = {int(x) for x in args.tune.split(",")}
        questions, memories, query_ms = collect(
            args.file, args.model, tune_set if args.real else None
        )
        if args.cache:
            args.cache.write_bytes(pickle.dumps((questions, memories, query_ms)))
    by_session = sessions_of(memories)
    tune = {int(x) for x in args.tune.split(",")}
    check = {int(x) for x in args.check.split(",")}
    base: dict[str, Any] = {}
    if args.floor:
        rel, absolute = (float(x) for x in args.floor.split(","))
        base = {"floor_rel": rel, "floor_abs": absolute}
    rows = []
    for name, variant in VARIANTS.items():
        v = {**base, **variant}
        r_t = recall([q for q in questions if q.conv in tune], memories, by_session, **v)
        r_c = recall([q for q in questions if q.conv in check], memories, by_session, **v)
        r_a = recall(questions, memories, by_session, **v)
        rows.append({"variant": name, "tune": r_t, "check": r_c, "all": r_a})
        print(f"{name:<45} tune {r_t:.4f}  check {r_c:.4f}  all {r_a:.4f}", flush=True)
    report = {
        "model": args.model,
        "questions": len(questions),
        "query_embedding_p50_ms": query_ms,
        "seconds": time.perf_counter() - started,
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
