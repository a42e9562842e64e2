"""Fusion levers on LoCoMo and BEAM (issue 26, item 2): does hybrid beat its best single leg?

    python scripts/fusion_levers.py ../shared/data/locomo/locomo_dev.json --tune 0,1,2,3 \
        --check 4,5,6 --cache locomo.pkl
    python scripts/fusion_levers.py ../beam/chats/100K -c 1,2,3,4,5,6,7,8,9,10 --tune 1,2,3,4,5 \
        --check 6,7,8,9,10 --cache beam.pkl

Stores every memory once through the write path (LoCoMo: the observations; BEAM: every message
as ``"<role>: <text>"``, as ``memlane replay`` does), then records per question the two ranked
legs (top :data:`DEPTH`, with cosine and BM25 scores) and the cosine to every memory of its
conversation. Fusion variants are computed from those in Python with the formula of
:mod:`memlane.retrieval` (RRF, relevance floor, neighbour leg; tie-break left out), so each
variant costs a second. Each recipe of :data:`memlane.retrieval.RECIPES` and ``LEVERS`` is also
run through the real search on the same store (``real: <name>`` rows). Prints recall@10 of every
variant on the tune and check conversations.
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memlane import MemoryEngine, Settings
from memlane.engine import MemoryInput
from memlane.eval.replay import BeamChat, load_conversations, select_conversations
from memlane.eval.replay.locomo import normalise_evidence
from memlane.retrieval import LEVERS, RECIPES
from memlane.types import MemoryType

DEPTH = 40


@dataclass
class Q:
    conv: str
    category: str
    wanted: set[str]
    vector: list[tuple[str, float]]  # (id, cosine), best first
    fts: list[tuple[str, float]]  # (id, BM25), best first
    cosine: dict[str, float]
    text: str
    #: recipe name -> the real search's top 10 ids (:data:`memlane.retrieval.RECIPES`, LEVERS)
    real: dict[str, list[str]] = field(default_factory=dict)


def _inputs(conv: Any) -> list[list[MemoryInput]]:
    owner = conv.sample_id
    if isinstance(conv, BeamChat):
        return [
            [
                MemoryInput(
                    content=m.memory_text(),
                    type=MemoryType.OBSERVATION,
                    owner=owner,
                    session=f"{owner}:{number}",
                    metadata={"evidence": [str(m.id)], "role": m.role},
                )
                for m in messages
            ]
            for number, messages in conv.batches
        ]
    return [
        [
            MemoryInput(
                content=o.text,
                type=MemoryType.OBSERVATION,
                owner=owner,
                session=f"{owner}:{number}",
                metadata={"evidence": list(o.evidence), "role": "user"},
            )
            for o in conv.observations[number]
        ]
        for number in sorted(conv.observations)
    ]


def _evidence(value: object) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(v, str) and v.isdigit() for v in value):
        return list(value)
    return normalise_evidence(value)


def collect(path: Path, chosen: str | None) -> tuple[list[Q], dict[str, Any]]:
    convs = select_conversations(load_conversations(path), chosen)
    memories: dict[str, Any] = {}
    questions: list[Q] = []
    with tempfile.TemporaryDirectory() as home:
        engine = MemoryEngine.open(settings=Settings.load(home))
        try:
            for conv in convs:
                owner = conv.sample_id
                for batch in _inputs(conv):
                    if batch:
                        engine.add_many(batch)
                rows = engine.list(owner=owner, limit=100_000)
                rows.sort(key=lambda m: (m.created_at, m.id))
                position: dict[str, int] = {}
                for m in rows:
                    position[m.session or ""] = position.get(m.session or "", -1) + 1
                    memories[m.id] = {
                        "evidence": _evidence(m.metadata.get("evidence")),
                        "session": m.session,
                        "pos": position[m.session or ""],
                        "role": m.metadata.get("role", "user"),
                        "words": len(m.content.split()),
                        "text": m.content,
                    }
                ids = [m.id for m in rows]
                emb = engine.store.embeddings(owner, ids)
                matrix = np.stack([emb[i] for i in ids])
                for q in conv.questions:
                    real = {
                        name: [
                            h.memory.id
                            for h in engine.retriever.search(
                                q.text, owner=owner, limit=10, mode=r, record_access=False
                            )
                        ]
                        for name, r in {**RECIPES, **LEVERS}.items()
                    }
                    qvec = engine.embed_query(q.text)
                    vec = engine.store.vector_search(owner, None, qvec, DEPTH, None)
                    fts = engine.store.fts_search(owner, None, q.text, DEPTH, None)
                    questions.append(
                        Q(
                            owner,
                            str(q.category),
                            set(q.evidence),
                            [(h.id, h.score) for h in vec],
                            [(h.id, h.score) for h in fts],
                            dict(zip(ids, (matrix @ qvec).tolist(), strict=True)),
                            q.text,
                            real,
                        )
                    )
                print(f"collected {owner}: {len(rows)} memories", flush=True)
        finally:
            engine.close()
    return questions, memories


Weights = Callable[[Q, dict[str, Any]], tuple[float, float]]


def fuse(
    q: Q,
    memories: dict[str, Any],
    by_session: dict[str, list[str]],
    *,
    k: float = 60.0,
    cand: int = 10,
    cand_fts: int | None = None,
    weights: Weights | None = None,
    floor_rel: float = 0.5,
    floor_abs: float = 0.1,
    fts_floor_rel: float = 0.0,
    long_fts: float = 1.0,
    long_words: int = 150,
    fts_cos_power: float = 0.0,
    vec_cos_power: float = 0.0,
    expand: int = 3,
    expand_weight: float = 0.47,
    limit: int = 10,
) -> list[str]:
    wv, wf = weights(q, memories) if weights else (1.0, 1.0)
    scores: dict[str, float] = {}
    best = max((c for _, c in q.vector), default=0.0)
    for rank, (mid, _) in enumerate(q.vector[:cand], start=1):
        rel = max(q.cosine[mid], 0.0) / best if best > 0 else 0.0
        scores[mid] = scores.get(mid, 0.0) + wv * rel**vec_cos_power / (k + rank)
    fts = [m for m, _ in q.fts if q.cosine[m] >= best * fts_floor_rel]
    for rank, mid in enumerate(fts[: cand_fts or cand], start=1):
        w = wf * (long_fts if memories[mid]["words"] > long_words else 1.0)
        if fts_cos_power and best > 0:
            w *= (max(q.cosine[mid], 0.0) / best) ** fts_cos_power
        scores[mid] = scores.get(mid, 0.0) + w / (k + rank)
    if expand and expand_weight > 0:
        seeds = sorted(scores, key=scores.__getitem__, reverse=True)[:expand]
        extra: dict[str, float] = {}
        for s in seeds:
            m = memories[s]
            row = by_session[m["session"]]
            for p in (m["pos"] - 1, m["pos"] + 1):
                if 0 <= p < len(row) and row[p] not in scores:
                    extra[row[p]] = max(extra.get(row[p], 0.0), expand_weight * scores[s])
        scores.update(extra)
    floor = max(best * floor_rel, floor_abs)
    kept = [m for m in scores if q.cosine[m] >= floor]
    kept.sort(key=scores.__getitem__, reverse=True)
    return kept[:limit]


def recall(questions: Iterable[Q], memories: dict[str, Any], by_session: Any, **v: Any) -> float:
    values = []
    for q in questions:
        covered: set[str] = set()
        for mid in fuse(q, memories, by_session, **v):
            covered |= q.wanted.intersection(memories[mid]["evidence"])
        values.append(len(covered) / len(q.wanted))
    return sum(values) / len(values) if values else 0.0


def agreement(a: float, b: float) -> Weights:
    """fts weight ``a + b * overlap`` (overlap: shared ids of the two legs' top 10, 0..1)."""

    def w(q: Q, memories: dict[str, Any]) -> tuple[float, float]:
        top_v = {m for m, _ in q.vector[:10]}
        top_f = {m for m, _ in q.fts[:10]}
        overlap = len(top_v & top_f) / 10.0
        return 1.0, a + b * overlap

    return w


def gap(scale: float) -> Weights:
    """fts weight from how far its top BM25 score stands above its 10th (relative gap)."""

    def w(q: Q, memories: dict[str, Any]) -> tuple[float, float]:
        if len(q.fts) < 2:
            return 1.0, 1.0
        top, tenth = q.fts[0][1], q.fts[min(9, len(q.fts) - 1)][1]
        rel = (top - tenth) / top if top > 0 else 0.0
        return 1.0, min(1.0, scale * rel)

    return w


OFF = {"floor_rel": 0.0, "floor_abs": -1.0, "expand": 0}
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults (RRF k 60, 10 + 10, neighbours)": {},
    "vector leg alone": {"weights": lambda q, m: (1.0, 0.0), "expand": 0},
    "fts leg alone": {"weights": lambda q, m: (0.0, 1.0), **OFF},
    "no neighbour leg": {"expand": 0},
    "fts candidates 5": {"cand_fts": 5},
    "fts candidates 7": {"cand_fts": 7},
    "fts weight 0.8": {"weights": lambda q, m: (1.0, 0.8)},
    "fts weight 0.9": {"weights": lambda q, m: (1.0, 0.9)},
    "fts hits need cosine >= 0.7 x best": {"fts_floor_rel": 0.7},
    "fts hits need cosine >= 0.8 x best": {"fts_floor_rel": 0.8},
    "fts hits need cosine >= 0.85 x best": {"fts_floor_rel": 0.85},
    "fts hits need cosine >= 0.9 x best": {"fts_floor_rel": 0.9},
    "long memories (> 150 words) fts x 0.5": {"long_fts": 0.5},
    "long memories (> 150 words) fts x 0": {"long_fts": 0.0},
    "agreement: fts 0.6 + 0.8 x overlap": {"weights": agreement(0.6, 0.8)},
    "agreement: fts 0.8 + 0.4 x overlap": {"weights": agreement(0.8, 0.4)},
    "agreement: fts 0.7 + 1.0 x overlap": {"weights": agreement(0.7, 1.0)},
    "score gap: fts min(1, 2 x gap)": {"weights": gap(2.0)},
    "score gap: fts min(1, 3 x gap)": {"weights": gap(3.0)},
    "fts cos 0.8 + fts cands 7": {"fts_floor_rel": 0.8, "cand_fts": 7},
    "fts cos 0.8 + long x 0.5": {"fts_floor_rel": 0.8, "long_fts": 0.5},
    "fts cos 0.8 + agreement 0.8 + 0.4": {"fts_floor_rel": 0.8, "weights": agreement(0.8, 0.4)},
    **{f"fts per hit x (cos / best)^{p}": {"fts_cos_power": p} for p in (1, 2, 4, 8)},
    **{
        f"both legs per hit x (cos / best)^{p}": {"fts_cos_power": p, "vec_cos_power": p}
        for p in (1, 2, 4)
    },
    "fts cands 7 + fts (cos / best)^2": {"cand_fts": 7, "fts_cos_power": 2},
    "fts cands 7 + fts cos >= 0.7": {"cand_fts": 7, "fts_floor_rel": 0.7},
    "fts cands 5 + fts cos >= 0.7": {"cand_fts": 5, "fts_floor_rel": 0.7},
    "candidates 15 + fts (cos / best)^4": {"cand": 15, "fts_cos_power": 4},
    "candidates 20 + fts (cos / best)^4": {"cand": 20, "fts_cos_power": 4},
    "candidates 20 + both (cos / best)^4": {"cand": 20, "fts_cos_power": 4, "vec_cos_power": 4},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("-c", "--conversations", default=None)
    parser.add_argument("--tune", required=True, help="sample ids (LoCoMo: indexes) to tune on")
    parser.add_argument("--check", required=True)
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    if args.cache and args.cache.is_file():
        questions, memories = pickle.loads(args.cache.read_bytes())
    else:
        questions, memories = collect(args.path, args.conversations)
        if args.cache:
            args.cache.write_bytes(pickle.dumps((questions, memories)))
    convs = list(dict.fromkeys(q.conv for q in questions))

    def pick(spec: str) -> set[str]:
        out = set()
        for part in spec.split(","):
            out.add(part if part in convs else convs[int(part)])
        return out

    tune, check = pick(args.tune), pick(args.check)
    by_session: dict[str, list[str]] = {}
    for mid, m in sorted(memories.items(), key=lambda kv: (kv[1]["session"], kv[1]["pos"])):
        by_session.setdefault(m["session"], []).append(mid)
    rows = []
    for name in questions[0].real if questions else []:

        def real_recall(qs: Iterable[Q], name: str = name) -> float:
            values = []
            for q in qs:
                covered: set[str] = set()
                for mid in q.real[name]:
                    covered |= q.wanted.intersection(memories[mid]["evidence"])
                values.append(len(covered) / len(q.wanted))
            return sum(values) / len(values) if values else 0.0

        r_t = real_recall(q for q in questions if q.conv in tune)
        r_c = real_recall(q for q in questions if q.conv in check)
        r_a = real_recall(questions)
        rows.append({"variant": f"real: {name}", "tune": r_t, "check": r_c, "all": r_a})
        print(f"real {name:<37} tune {r_t:.4f}  check {r_c:.4f}  all {r_a:.4f}", flush=True)
    for name, v in VARIANTS.items():
        r_t = recall([q for q in questions if q.conv in tune], memories, by_session, **v)
        r_c = recall([q for q in questions if q.conv in check], memories, by_session, **v)
        r_a = recall(questions, memories, by_session, **v)
        rows.append({"variant": name, "tune": r_t, "check": r_c, "all": r_a})
        print(f"{name:<42} tune {r_t:.4f}  check {r_c:.4f}  all {r_a:.4f}", flush=True)
    print(json.dumps({"questions": len(questions), "seconds": time.perf_counter() - started}))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
