"""Long chat messages as memory (issue 26, item 3): what should the vector of a message longer
than the model's window be?

    python scripts/long_messages.py --cache beam.pkl --tune 1,2,3,4,5 --check 6,7,8,9,10

Reads a cache of ``scripts/fusion_levers.py`` (the store's memories and, per question, the legs),
cuts every memory longer than ``--words`` words into passages of ``--words`` words, embeds them
with the default model, and measures recall@10 (hybrid with the default fusion, and the vector leg
alone) with the vector of each long memory replaced by:

- ``first window``: what is stored today (the model reads the first 256 tokens; the cached legs);
- ``mean of passages``: the normalised mean of the passages' vectors (one vector per memory);
- ``best passage``: the passage nearest the question (a memory with one vector per passage, or
  passages stored as memories of their own with the hits folded back into their message);
- ``first window or best passage``: the better of the two.

The full-text leg is unchanged (BM25 reads the whole text whatever the vector is). Then
:func:`as_passages` simulates passages stored as memories of their own (BM25 over the passages
too); that part was not run to completion in issue 26's session (the passages' embedding took
over an hour at load 8-17: ``--vectors`` caches it). Figures: docs/replay.md, "Chat logs as
memory: long messages".
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from fusion_levers import DEPTH, Bm25, Q, fuse
from recall_levers import covered, sessions_of

from memlane import MemoryEngine, Settings
from memlane.store.text_index import tokens


def passages(text: str, size: int) -> list[str]:
    """``text`` in consecutive passages of ``size`` words (the last may be shorter)."""
    words = text.split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]


def _embed(
    questions: list[Q], memories: dict[str, Any], long_ids: list[str], size: int
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """The passages' vectors of each long memory, and each question's vector (in order)."""
    with tempfile.TemporaryDirectory() as home:
        engine = MemoryEngine.open(settings=Settings.load(home))
        try:
            t0 = time.perf_counter()
            pieces: dict[str, np.ndarray] = {}
            for mid in long_ids:
                pieces[mid] = np.asarray(engine.embed(passages(memories[mid]["text"], size)))
            n_pieces = sum(len(v) for v in pieces.values())
            print(f"embedded {n_pieces} passages in {time.perf_counter() - t0:.0f} s")
            return pieces, [np.asarray(engine.embed_query(q.text)) for q in questions]
        finally:
            engine.close()


def as_passages(
    questions: list[Q],
    memories: dict[str, Any],
    pieces: dict[str, np.ndarray],
    qvecs: dict[int, np.ndarray],
    size: int,
    split: bool = True,
) -> dict[int, list[str]]:
    """Each long memory stored as passages of ``size`` words, each a memory of its own citing
    the message (``split=False``: as stored, for the check that this reproduces the hybrid
    search): the default fusion (RRF k 60 over 10 + 10, neighbours of the top 3 at 0.47, the
    floor, ties to the newer) over those units, BM25 over their texts. Returns, per question,
    the memory ids behind the top 10 units (one per unit: two passages of one message take two
    places)."""
    units: dict[str, dict[str, Any]] = {}  # unit id -> parent, text, session, position
    order: dict[str, list[str]] = {}  # conversation -> unit ids in writing order
    conv_of = {mid: q.conv for q in questions for mid in q.cosine}
    for mid, m in sorted(memories.items(), key=lambda kv: kv[1]["created"]):
        texts = passages(m["text"], size) if split and mid in pieces else [m["text"]]
        for i, text in enumerate(texts):
            uid = f"{mid}#{i}"
            units[uid] = {"parent": mid, "i": i, "text": text, "session": m["session"]}
            order.setdefault(conv_of.get(mid, ""), []).append(uid)
    bm25 = {c: Bm25(ids, [units[u]["text"] for u in ids]) for c, ids in order.items()}
    rows: dict[str, list[str]] = {}
    for uid in (u for ids in order.values() for u in ids):
        rows.setdefault(units[uid]["session"], []).append(uid)
    place = {u: (units[u]["session"], n) for row in rows.values() for n, u in enumerate(row)}
    age = {u: n for ids in order.values() for n, u in enumerate(ids)}
    out: dict[int, list[str]] = {}
    for q in questions:
        qv = qvecs[id(q)]
        ids = order[q.conv]
        cosine = {}
        for u in ids:
            parent, i = units[u]["parent"], units[u]["i"]
            split_here = split and parent in pieces
            cosine[u] = float(pieces[parent][i] @ qv) if split_here else q.cosine[parent]
        vector = sorted(ids, key=lambda u: -cosine[u])[:10]
        fts = bm25[q.conv].search(dict.fromkeys(tokens(q.text), 1.0), 10)
        scores: dict[str, float] = {}
        for leg in (vector, fts):
            for rank, u in enumerate(leg, start=1):
                scores[u] = scores.get(u, 0.0) + 1.0 / (60.0 + rank)
        scores = {u: scores[u] for u in sorted(scores, key=lambda u: -age[u])}  # newer first
        for seed in sorted(scores, key=scores.__getitem__, reverse=True)[:3]:
            session, n = place[seed]
            for other in rows[session][max(0, n - 1) : n] + rows[session][n + 1 : n + 2]:
                if other not in scores:
                    scores[other] = 0.47 * scores[seed]
        best = cosine[vector[0]] if vector else 0.0
        kept = [u for u in scores if cosine[u] >= max(best * 0.5, 0.1)]
        kept.sort(key=scores.__getitem__, reverse=True)
        out[id(q)] = [units[u]["parent"] for u in kept[:10]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--tune", required=True)
    parser.add_argument("--check", required=True)
    parser.add_argument("--words", type=int, default=150, help="passage size in words")
    parser.add_argument("--vectors", type=Path, help="pickle of the passages' vectors (reused)")
    args = parser.parse_args()
    sys.modules["__main__"].Q = Q  # type: ignore[attr-defined]  # the cache pickled fusion_levers.Q as __main__.Q
    questions, memories = pickle.loads(args.cache.read_bytes())
    by_session = sessions_of(memories)
    long_ids = [mid for mid, m in memories.items() if m["words"] > args.words]
    print(f"{len(long_ids)} of {len(memories)} memories longer than {args.words} words")
    if args.vectors and args.vectors.is_file():
        pieces, by_index = pickle.loads(args.vectors.read_bytes())
    else:
        pieces, by_index = _embed(questions, memories, long_ids, args.words)
        if args.vectors:
            args.vectors.write_bytes(pickle.dumps((pieces, by_index)))
    qvecs = {id(q): by_index[n] for n, q in enumerate(questions)}
    mean = {}
    for mid, vecs in pieces.items():
        v = vecs.mean(axis=0)
        mean[mid] = v / max(float(np.linalg.norm(v)), 1e-12)

    def variant(q: Q, how: str) -> Q:
        qv = qvecs[id(q)]
        cosine = dict(q.cosine)
        for mid in pieces:
            if mid not in cosine:
                continue
            if how == "mean":
                cosine[mid] = float(mean[mid] @ qv)
            elif how == "best":
                cosine[mid] = float((pieces[mid] @ qv).max())
            elif how == "first or best":
                cosine[mid] = max(cosine[mid], float((pieces[mid] @ qv).max()))
        top = sorted(cosine, key=cosine.__getitem__, reverse=True)[:DEPTH]
        return replace(q, cosine=cosine, vector=[(m, cosine[m]) for m in top])

    tune = set(args.tune.split(","))
    check = set(args.check.split(","))
    for label, split in (("whole messages", False), ("passages as memories", True)):
        top = as_passages(questions, memories, pieces, qvecs, args.words, split)
        row = {
            name: sum(covered(q.wanted, top[id(q)], memories) for q in qs) / max(len(qs), 1)
            for name, qs in (
                ("tune", [q for q in questions if q.conv in tune]),
                ("check", [q for q in questions if q.conv in check]),
            )
        }
        print(f"{label:<35} hybrid  tune {row['tune']:.4f}  check {row['check']:.4f}")
    for how in ("first window", "mean", "best", "first or best"):
        qs = [q if how == "first window" else variant(q, how) for q in questions]
        for label, extra in FUSIONS.items():
            row: dict[str, Any] = {}
            for split, ids in (("tune", tune), ("check", check)):
                values = [
                    covered(q.wanted, fuse(q, memories, by_session, **extra), memories)
                    for q in qs
                    if q.conv in ids
                ]
                row[split] = sum(values) / max(len(values), 1)
            print(f"{how:<16} {label:<18} tune {row['tune']:.4f}  check {row['check']:.4f}")


#: The fusions measured: the real search's tie-break (of equal fused scores, the newer memory).
FUSIONS: dict[str, dict[str, Any]] = {
    "hybrid": {"newer_first": True},
    "hybrid, long x 0.5": {
        "newer_first": True,
        "long_fts": 0.5,
        "long_vec": 0.5,
        "long_words": 300,
    },
    "vector alone": {"weights": lambda q, m: (1.0, 0.0), "expand": 0},
}


if __name__ == "__main__":
    main()
