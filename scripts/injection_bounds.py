"""How far can a cut of the injection's candidates go? Bounds on a store a replay kept.

    memlane replay ../beam/chats/100K -c 1,2,3,4,5,6,7,8,9,10 --home DIR       # once: the store
    python scripts/injection_bounds.py ../beam/chats/100K --home DIR --cache beam.pkl

Each question's hybrid candidates are searched as the injection searches them (``--depth`` a
leg, ``--limit`` hits, no access recorded) and cached with their features: the legs' ranks,
cosine, BM25 score, whether the memory is long (``[retrieval] long_words``), the message's role
when the replay stored one, and the evidence it cites. Then, scored as ``memlane replay`` scores
first-turn blocks (items per block, recall = evidence covered):

- the pool: every candidate, and the top k fused hits;
- the real cut (:func:`memlane.injection.cut.decide`), and what each of its rules cut: the
  items, the cited messages, the recall each rule's cut items would add back;
- an optimistic bound for any cut built on these features: a logistic regression fitted on the
  questions' own candidates and scored on the same questions (top k by its probability), without
  and with the role (which memlane's own memories do not have). Fitted with plain gradient
  descent on standardised features (numpy; no model library for a one-off bound).

docs/replay.md, "BEAM, third look", has the figures of chats 1-10.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from memlane.config import Settings
from memlane.engine import MemoryEngine
from memlane.eval.replay import load_conversations, select_conversations
from memlane.eval.replay.run import _evidence
from memlane.injection.cut import decide
from memlane.retrieval import LegScores


def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per question: the hybrid candidates' features (see the module docstring)."""
    settings = Settings.load(args.home)
    rows: list[dict[str, Any]] = []
    chosen = select_conversations(load_conversations(args.file), args.conversations)
    with MemoryEngine.open(settings=settings) as engine:
        for conv in chosen:
            for question in conv.questions:
                wanted = set(question.evidence)
                if not wanted:
                    continue
                ev = LegScores()
                hits = engine.retriever.search(
                    question.text, owner=conv.sample_id, limit=args.limit, record_access=False,
                    evidence=ev, depth=args.depth,
                )  # fmt: skip
                rows.append({
                    "wanted": wanted, "best": ev.best_cosine, "top": ev.top_bm25,
                    "hits": [{
                        "ranks": dict(h.ranks), "cosine": h.similarity,
                        "bm25": ev.bm25.get(h.memory.id), "long": h.memory.id in ev.long,
                        "user": h.memory.metadata.get("role") == "user", "score": h.score,
                        "cited": frozenset(
                            wanted & set(_evidence(h.memory.metadata.get("evidence")))
                        ),
                    } for h in hits],
                })  # fmt: skip
            print(f"{conv.sample_id}: {len(rows)} questions", file=sys.stderr)
    return rows


def recall_of(rows: list[dict[str, Any]], chosen: list[list[dict[str, Any]]]) -> float:
    """Mean over questions of the share of the question's evidence the chosen hits cite."""
    total = 0.0
    for row, hits in zip(rows, chosen, strict=True):
        covered: set[str] = set().union(*(h["cited"] for h in hits)) if hits else set()
        total += len(covered) / len(row["wanted"])
    return total / max(len(rows), 1)


def features(row: dict[str, Any], hit: dict[str, Any], role: bool) -> list[float]:
    """One candidate's features for the bound (the same legs' scores the cut reads)."""
    v, f = hit["ranks"].get("vector"), hit["ranks"].get("fts")
    out = [
        float(v is not None), float(f is not None), 1 / (60 + v) if v else 0.0,
        1 / (60 + f) if f else 0.0, row["best"] - hit["cosine"],
        (hit["bm25"] or 0.0) / max(row["top"], 1e-9), float(hit["long"]),
        float("neighbour" in hit["ranks"]), hit["score"],
    ]  # fmt: skip
    return [*out, float(hit["user"])] if role else out


def bound(rows: list[dict[str, Any]], k: int, role: bool) -> float:
    """Recall of the top ``k`` candidates by a logistic regression fitted on these rows."""
    x = np.array([features(r, h, role) for r in rows for h in r["hits"]])
    y = np.array([bool(h["cited"]) for r in rows for h in r["hits"]], dtype=float)
    z = (x - x.mean(0)) / (x.std(0) + 1e-9)
    z = np.hstack([np.ones((len(z), 1)), z])
    w = np.zeros(z.shape[1])
    for _ in range(3000):  # plain gradient descent, L2 1e-3: converged well before
        p = 1 / (1 + np.exp(-z @ w))
        w -= 0.5 * (z.T @ (p - y) / len(y) + 1e-3 * w)
    prob = iter(1 / (1 + np.exp(-z @ w)))
    chosen = []
    for row in rows:
        scored = [(next(prob), i) for i in range(len(row["hits"]))]
        top = sorted(scored, reverse=True)[:k]
        chosen.append([row["hits"][i] for _, i in top])
    return recall_of(rows, chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--home", required=True)
    parser.add_argument("-c", "--conversations", default=None)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--depth", type=int, default=10, help="candidates per leg")
    parser.add_argument("--limit", type=int, default=20, help="hits per question")
    parser.add_argument("-k", type=int, default=9, help="block size of the bounds")
    args = parser.parse_args()
    cache = Path(args.cache)
    rows = pickle.loads(cache.read_bytes()) if cache.exists() else collect(args)
    cache.write_bytes(pickle.dumps(rows))
    n = len(rows)
    print(f"{n} questions; pool: {sum(len(r['hits']) for r in rows) / n:.2f} items, "
          f"recall {recall_of(rows, [r['hits'] for r in rows]):.4f}")  # fmt: skip
    for k in (5, 8, 9, 10, 15, 20):
        print(f"top {k} fused: recall {recall_of(rows, [r['hits'][:k] for r in rows]):.4f}")
    cfg = Settings.load(args.home).injection
    kept: list[list[dict[str, Any]]] = []
    items: Counter[tuple[str, bool, bool]] = Counter()
    cut_by: dict[str, list[list[dict[str, Any]]]] = {}
    for row in rows:
        ev = LegScores(top_bm25=row["top"], best_cosine=row["best"])
        mine: list[dict[str, Any]] = []
        for hit in row["hits"]:
            ok, rule = decide(hit["ranks"], hit["cosine"], hit["bm25"], ev, cfg, hit["long"])
            key = f"{rule} {'long' if hit['long'] else 'short'}"
            items[(key, ok, bool(hit["cited"]))] += 1
            if ok:
                mine.append(hit)
            else:
                cut_by.setdefault(key, [[] for _ in rows])[len(kept)].append(hit)
        kept.append(mine)
    base = recall_of(rows, kept)
    print(f"the cut: {sum(map(len, kept)) / n:.2f} items, recall {base:.4f}")
    for key in sorted({k[0] for k in items}):
        back = cut_by.get(key)
        gain = (
            recall_of(rows, [a + b for a, b in zip(kept, back, strict=True)]) - base if back else 0
        )
        print(f"  {key:13s} kept {sum(items[(key, True, c)] for c in (0, 1)) / n:.2f} a question "
              f"({items[(key, True, True)]} cite), cut {sum(items[(key, False, c)] for c in (0, 1)) / n:.2f} "
              f"({items[(key, False, True)]} cite; +{gain:.4f} recall if kept)")  # fmt: skip
    for role in (False, True):
        print(f"bound, top {args.k} by a fitted logistic regression{' + role' * role}: "
              f"recall {bound(rows, args.k, role):.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
