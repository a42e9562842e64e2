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

The full-text leg is unchanged (BM25 reads the whole text whatever the vector is).
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
from fusion_levers import DEPTH, Q, fuse
from recall_levers import covered, sessions_of

from memlane import MemoryEngine, Settings


def passages(text: str, size: int) -> list[str]:
    """``text`` in consecutive passages of ``size`` words (the last may be shorter)."""
    words = text.split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--tune", required=True)
    parser.add_argument("--check", required=True)
    parser.add_argument("--words", type=int, default=150, help="passage size in words")
    args = parser.parse_args()
    sys.modules["__main__"].Q = Q  # type: ignore[attr-defined]  # the cache pickled fusion_levers.Q as __main__.Q
    questions, memories = pickle.loads(args.cache.read_bytes())
    by_session = sessions_of(memories)
    long_ids = [mid for mid, m in memories.items() if m["words"] > args.words]
    print(f"{len(long_ids)} of {len(memories)} memories longer than {args.words} words")
    with tempfile.TemporaryDirectory() as home:
        engine = MemoryEngine.open(settings=Settings.load(home))
        try:
            t0 = time.perf_counter()
            pieces: dict[str, np.ndarray] = {}
            for mid in long_ids:
                pieces[mid] = np.asarray(engine.embed(passages(memories[mid]["text"], args.words)))
            n_pieces = sum(len(v) for v in pieces.values())
            print(f"embedded {n_pieces} passages in {time.perf_counter() - t0:.0f} s")
            qvecs = {id(q): np.asarray(engine.embed_query(q.text)) for q in questions}
        finally:
            engine.close()
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
