"""Fusion levers on LoCoMo and BEAM (issue 26, item 2): does hybrid beat its best single leg?

    python scripts/fusion_levers.py ../shared/data/locomo/locomo_dev.json --tune 0,1,2,3 \
        --check 4,5,6 --home locomo-store --cache locomo.pkl
    python scripts/fusion_levers.py ../beam/chats/100K -c 1,2,3,4,5,6,7,8,9,10 --tune 1,2,3,4,5 \
        --check 6,7,8,9,10 --home beam-store --cache beam.pkl

Stores every memory once through the write path (LoCoMo: the observations; BEAM: every message
as ``"<role>: <text>"``, as ``memlane replay`` does), then records per question the two ranked
legs (top :data:`DEPTH`, with cosine and BM25 scores) and the cosine to every memory of its
conversation. Fusion variants are computed from those in Python with the formula of
:mod:`memlane.retrieval` (RRF, relevance floor, neighbour leg; tie-break left out), so each
variant costs a second; the loading, the neighbour leg, the floor and the scoring are
``scripts/recall_levers.py``'s. Each recipe of :data:`memlane.retrieval.RECIPES` and ``LEVERS``
is also run through the real search on the same store (``real: <name>`` rows). ``--home DIR``
keeps the store: a later run with the same ``DIR`` skips the storing (the embeddings are the
slow part) and only searches again. Prints recall@10 of every variant on the tune and check
conversations.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recall_levers import (
    above_floor,
    covered,
    expand_neighbours,
    recall,
    record_memories,
    sessions_of,
)

from memlane import MemoryEngine, Settings
from memlane.engine import MemoryInput
from memlane.eval.replay import BeamChat, load_conversations, select_conversations
from memlane.eval.replay.run import _evidence
from memlane.retrieval import LEVERS, RECIPES
from memlane.store.text_index import K1, B, tokens
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


def _inputs(conv: Any, max_chars: int) -> list[list[MemoryInput]]:
    owner = conv.sample_id
    if isinstance(conv, BeamChat):
        return [
            [
                MemoryInput(
                    content=text,
                    type=MemoryType.OBSERVATION,
                    owner=owner,
                    session=f"{owner}:{number}",
                    metadata={"evidence": [str(m.id)], "role": m.role},
                )
                for m in messages
                for text in m.memory_texts(max_chars)
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
                metadata={"evidence": list(o.evidence), "speaker": o.speaker},
            )
            for o in conv.observations[number]
        ]
        for number in sorted(conv.observations)
    ]


def collect(path: Path, chosen: str | None, home: Path | None) -> tuple[list[Q], dict[str, Any]]:
    convs = select_conversations(load_conversations(path), chosen)
    memories: dict[str, Any] = {}
    questions: list[Q] = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = MemoryEngine.open(settings=Settings.load(home or tmp))
        try:
            for conv in convs:
                owner = conv.sample_id
                if engine.count(owner) == 0:
                    for batch in _inputs(conv, engine.settings.dedup.max_chars):
                        if batch:
                            engine.add_many(batch)
                ids, matrix = record_memories(engine, owner, memories, _evidence)
                for q in conv.questions:
                    real = {
                        name: [
                            h.memory.id
                            for h in engine.search(
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
                print(f"collected {owner}: {len(ids)} memories", flush=True)
        finally:
            engine.close()
    return questions, memories


class Bm25:
    """BM25 over one conversation's memories, the formula of :mod:`memlane.store.text_index`
    (same tokens, ``k1``, ``b`` and IDF), with weighted query terms: for pseudo-relevance
    feedback, whose expansion terms weigh less than the question's own."""

    def __init__(self, ids: list[str], texts: list[str]) -> None:
        self.ids = ids
        self.tf = [Counter(tokens(t)) for t in texts]
        self.length = [sum(c.values()) for c in self.tf]
        self.avg = max(sum(self.length) / max(len(ids), 1), 1e-9)
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        n = len(ids)
        self.share = {t: d / max(n, 1) for t, d in df.items()}
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def search(self, terms: dict[str, float], k: int) -> list[str]:
        scores: dict[int, float] = {}
        for term, weight in terms.items():
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i, c in enumerate(self.tf):
                tf = c.get(term)
                if tf:
                    norm = K1 * (1.0 - B + B * self.length[i] / self.avg)
                    scores[i] = scores.get(i, 0.0) + weight * idf * (K1 + 1) * tf / (tf + norm)
        order = sorted(scores, key=lambda i: -scores[i])[:k]
        return [self.ids[i] for i in order]

    def expanded(self, text: str, feedback: list[str], terms: int, beta: float) -> dict[str, float]:
        """The question's terms (weight 1) and the ``terms`` best terms of the ``feedback``
        memories by summed tf x idf (weight ``beta``): RM3-like feedback, unnormalised."""
        query = dict.fromkeys(tokens(text), 1.0)
        pool: Counter[str] = Counter()
        at = {mid: i for i, mid in enumerate(self.ids)}
        for mid in feedback:
            c = self.tf[at[mid]]
            for term, tf in c.items():
                if term not in query:
                    pool[term] += tf / max(self.length[at[mid]], 1) * self.idf[term]
        for term, _ in pool.most_common(terms):
            query[term] = beta
        return query


Weights = Callable[[Q, dict[str, Any]], tuple[float, float]]
_CTX: dict[str, Any] = {}  # conversation -> Bm25, built once (main)


def entities(text: str) -> set[str]:
    """Capitalised words of ``text`` past its first word (names, products, places), as index
    terms; the entity leg matches them against a memory's terms and its speaker."""
    out: set[str] = set()
    for word in text.replace("?", " ").split()[1:]:
        w = word.strip(".,;:!\"'()[]")
        if w[:1].isupper() and w.lower() not in ("i", "i'm", "i've", "i'd", "i'll"):
            out.update(tokens(w))
    return out


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
    long_vec: float = 1.0,
    long_words: int = 150,
    role_fts: float = 1.0,
    role_vec: float = 1.0,
    fts_cos_power: float = 0.0,
    vec_cos_power: float = 0.0,
    entity: float = 0.0,
    entity_share: float = 1.0,
    prf: tuple[int, int, float] | None = None,
    expand: int = 3,
    expand_weight: float = 0.47,
    limit: int = 10,
    newer_first: bool = False,
) -> list[str]:
    wv, wf = weights(q, memories) if weights else (1.0, 1.0)
    scores: dict[str, float] = {}
    best = max((c for _, c in q.vector), default=0.0)
    for rank, (mid, _) in enumerate(q.vector[:cand], start=1):
        rel = max(q.cosine[mid], 0.0) / best if best > 0 else 0.0
        w = wv * (role_vec if memories[mid]["role"] == "assistant" else 1.0)
        w *= long_vec if memories[mid]["words"] > long_words else 1.0
        scores[mid] = scores.get(mid, 0.0) + w * rel**vec_cos_power / (k + rank)
    fts_ids = [m for m, _ in q.fts]
    if prf is not None:
        bm25 = _CTX[q.conv]
        fb, n_terms, beta = prf
        fts_ids = bm25.search(bm25.expanded(q.text, fts_ids[:fb], n_terms, beta), DEPTH)
    fts = [m for m in fts_ids if q.cosine[m] >= best * fts_floor_rel]
    for rank, mid in enumerate(fts[: cand_fts or cand], start=1):
        w = wf * (long_fts if memories[mid]["words"] > long_words else 1.0)
        w *= role_fts if memories[mid]["role"] == "assistant" else 1.0
        if fts_cos_power and best > 0:
            w *= (max(q.cosine[mid], 0.0) / best) ** fts_cos_power
        scores[mid] = scores.get(mid, 0.0) + w / (k + rank)
    if entity > 0:
        share = _CTX[q.conv].share
        wanted = {e for e in entities(q.text) if share.get(e, 1.0) <= entity_share}
        if wanted:  # memories naming most of the question's names, then by cosine
            ranked = sorted(
                (m for m in q.cosine if wanted & memories[m]["names"]),
                key=lambda m: (-len(wanted & memories[m]["names"]), -q.cosine[m]),
            )
            for rank, mid in enumerate(ranked[:cand], start=1):
                scores[mid] = scores.get(mid, 0.0) + entity / (k + rank)
    if newer_first:  # the real search's tie-break: of equal fused scores, the newer memory
        scores = {m: scores[m] for m in sorted(scores, key=lambda m: memories[m]["created"])[::-1]}
    expand_neighbours(scores, memories, by_session, expand, expand_weight)
    return above_floor(scores, q.cosine, best, floor_rel, floor_abs, limit)


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


def cos_gap(scale: float) -> Weights:
    """vector weight from the cosine gap between its 1st and 10th hit (a confident dense leg
    weighs more), fts 1."""

    def w(q: Q, memories: dict[str, Any]) -> tuple[float, float]:
        if len(q.vector) < 10:
            return 1.0, 1.0
        return 1.0 + scale * (q.vector[0][1] - q.vector[9][1]), 1.0

    return w


OFF = {"floor_rel": 0.0, "floor_abs": -1.0, "expand": 0}
#: The kept defaults (long memories x 0.5 in both legs) with the real search's tie-break.
KEPT: dict[str, Any] = {"long_fts": 0.5, "long_vec": 0.5, "long_words": 300, "newer_first": True}
#: Levers measured again on top of the kept defaults.
ON_TOP: dict[str, dict[str, Any]] = {
    "nothing": {},
    "assistant memories both legs x 0.5": {"role_fts": 0.5, "role_vec": 0.5},
    "entity leg (names in <= 5%), weight 0.5": {"entity": 0.5, "entity_share": 0.05},
    "PRF (top 3, 10 terms, beta 0.3)": {"prf": (3, 10, 0.3)},
    "PRF (top 3, 5 terms, beta 0.3)": {"prf": (3, 5, 0.3)},
    "agreement: fts 0.8 + 0.4 x overlap": {"weights": agreement(0.8, 0.4)},
    "score gap: fts min(1, 2 x gap)": {"weights": gap(2.0)},
    "cosine gap: vector 1 + 1 x gap": {"weights": cos_gap(1.0)},
    "fts candidates 5": {"cand_fts": 5},
    "fts hits need cosine >= 0.7 x best": {"fts_floor_rel": 0.7},
}
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults (RRF k 60, 10 + 10, neighbours)": {},
    "vector leg alone": {"weights": lambda q, m: (1.0, 0.0), "expand": 0},
    "fts leg alone": {"weights": lambda q, m: (0.0, 1.0), **OFF},
    "no neighbour leg": {"expand": 0},
    "fts candidates 5": {"cand_fts": 5},
    "fts weight 0.9": {"weights": lambda q, m: (1.0, 0.9)},
    "fts hits need cosine >= 0.7 x best": {"fts_floor_rel": 0.7},
    "fts hits need cosine >= 0.8 x best": {"fts_floor_rel": 0.8},
    **{
        f"long memories (> {n} words) fts x {x}": {"long_fts": x, "long_words": n}
        for n in (100, 150, 300)
        for x in (0.0, 0.5, 0.8)
    },
    **{f"assistant memories fts x {x}": {"role_fts": x} for x in (0.0, 0.5, 0.8)},
    **{f"assistant memories both legs x {x}": {"role_fts": x, "role_vec": x} for x in (0.5, 0.8)},
    "ties to the newer memory (as the real search)": {"newer_first": True},
    **{
        f"assistant memories both legs x {x}, ties to the newer": {
            "role_fts": x,
            "role_vec": x,
            "newer_first": True,
        }
        for x in (0.5, 0.9)
    },
    **{f"assistant memories both legs x {x}": {"role_fts": x, "role_vec": x} for x in (0.3, 0.9)},
    "assistant both legs x 0.5 + long (> 300 words) fts x 0.5": {
        "role_fts": 0.5,
        "role_vec": 0.5,
        "long_fts": 0.5,
        "long_words": 300,
    },
    **{
        f"long memories (> {n} words) both legs x 0.5": {
            "long_fts": 0.5,
            "long_vec": 0.5,
            "long_words": n,
        }
        for n in (200, 300, 500)
    },
    **{
        f"long memories (> {n} words) both legs x {x}, ties to the newer": {
            "long_fts": x,
            "long_vec": x,
            "long_words": n,
            "newer_first": True,
        }
        for n in (200, 300, 400)
        for x in (0.5, 0.9)
    },
    "assistant or long (> 300 words) both legs x 0.5, ties to the newer": {
        "role_fts": 0.5,
        "role_vec": 0.5,
        "long_fts": 0.5,
        "long_vec": 0.5,
        "long_words": 300,
        "newer_first": True,
    },
    **{f"kept + {name}": {**KEPT, **extra} for name, extra in ON_TOP.items()},
    "agreement: fts 0.8 + 0.4 x overlap": {"weights": agreement(0.8, 0.4)},
    "score gap: fts min(1, 2 x gap)": {"weights": gap(2.0)},
    **{f"cosine gap: vector 1 + {s} x gap": {"weights": cos_gap(s)} for s in (1.0, 3.0)},
    **{f"entity leg, weight {w}": {"entity": w} for w in (0.25, 0.5, 1.0)},
    **{
        f"entity leg, names in <= {int(x * 100)}% of memories, weight {w}": {
            "entity": w,
            "entity_share": x,
        }
        for x in (0.02, 0.05, 0.1)
        for w in (0.5, 1.0)
    },
    **{
        f"fts = BM25 + PRF (top {fb}, {n} terms, beta {b})": {"prf": (fb, n, b)}
        for fb in (3, 5)
        for n in (5, 10)
        for b in (0.3, 0.5)
    },
    "fts = BM25 + PRF (top 0): the sim's own BM25": {"prf": (0, 0, 0.0)},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("-c", "--conversations", default=None)
    parser.add_argument("--tune", required=True, help="sample ids (LoCoMo: indexes) to tune on")
    parser.add_argument("--check", required=True)
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--home", type=Path, help="keep the store here (reused when it exists)")
    parser.add_argument("--only", default="", help="run only variants whose name has this")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    if args.cache and args.cache.is_file():
        questions, memories = pickle.loads(args.cache.read_bytes())
    else:
        questions, memories = collect(args.path, args.conversations, args.home)
        if args.cache:
            args.cache.write_bytes(pickle.dumps((questions, memories)))
    convs = list(dict.fromkeys(q.conv for q in questions))

    def pick(spec: str) -> set[str]:
        return {part if part in convs else convs[int(part)] for part in spec.split(",")}

    tune, check = pick(args.tune), pick(args.check)
    by_session = sessions_of(memories)
    for m in memories.values():
        m["names"] = set(tokens(m["text"])) | set(tokens(str(m.get("speaker", ""))))
    for conv in convs:
        ids = sorted({mid for q in questions if q.conv == conv for mid in q.cosine})
        _CTX[conv] = Bm25(ids, [memories[mid]["text"] for mid in ids])

    def row(name: str, score: Callable[[Iterable[Q]], float]) -> None:
        r_t = score(q for q in questions if q.conv in tune)
        r_c = score(q for q in questions if q.conv in check)
        r_a = score(questions)
        rows.append({"variant": name, "tune": r_t, "check": r_c, "all": r_a})
        print(f"{name:<48} tune {r_t:.4f}  check {r_c:.4f}  all {r_a:.4f}", flush=True)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    rows: list[dict[str, Any]] = []
    for name in questions[0].real if questions else []:
        row(
            f"real: {name}",
            lambda qs, n=name: mean([covered(q.wanted, q.real[n], memories) for q in qs]),
        )
    for name, v in VARIANTS.items():
        if args.only and args.only not in name:
            continue
        row(name, lambda qs, v=v: recall(qs, memories, by_session, fuse, **v))
    print(json.dumps({"questions": len(questions), "seconds": time.perf_counter() - started}))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
