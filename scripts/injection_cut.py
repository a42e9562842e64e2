"""Tune the injection's cut (memlane.injection.cut) on a store a replay kept.

    memlane replay ../shared/data/locomo/locomo_dev.json --home DIR      # once: writes the store
    python scripts/injection_cut.py ../shared/data/locomo/locomo_dev.json --home DIR \
        --cache locomo-cut.pkl                                             # then: seconds

Each question is searched once per mode (hybrid, vector, fts) as the injection searches it (limit
``search_limit``, no access recorded) and its candidates are kept in ``--cache`` (their legs'
ranks, cosine, BM25 score, whether they cite the question's evidence); a second run reads the
cache and never embeds. Then every combination of the grid below is applied with the real rule
(:func:`memlane.injection.cut.decide`) and scored as ``memlane replay`` scores first-turn blocks:
mean items, precision (items citing evidence / items) and recall (evidence covered). The real
pipeline's in-block dedup is not simulated (it removes ~1 % of the items); ``memlane replay
--score-only`` confirms a choice on the real injector.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
from pathlib import Path
from typing import Any

from memlane.config import Settings
from memlane.engine import MemoryEngine
from memlane.eval.replay import load_conversations, select_conversations
from memlane.eval.replay.run import _evidence
from memlane.injection.cut import decide
from memlane.retrieval import LegScores

MODES = ("hybrid", "vector", "fts")


def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per question and mode: the candidates' features (see the module docstring)."""
    chosen = select_conversations(load_conversations(args.file), args.conversations)
    settings = Settings.load(args.home)
    limit = settings.injection.search_limit
    rows: list[dict[str, Any]] = []
    with MemoryEngine.open(settings=settings) as engine:
        for conv in chosen:
            for question in conv.questions:
                wanted = set(question.evidence)
                if not wanted:
                    continue
                row: dict[str, Any] = {"conv": conv.sample_id, "wanted": wanted}
                for mode in MODES:
                    ev = LegScores()
                    hits = engine.retriever.search(
                        question.text,
                        owner=conv.sample_id,
                        limit=limit,
                        mode=mode,
                        record_access=False,
                        evidence=ev,
                        depth=args.depth,
                    )
                    row[mode] = {
                        "best": ev.best_cosine,
                        "top": ev.top_bm25,
                        "hits": [
                            (
                                dict(h.ranks),
                                h.similarity,
                                ev.bm25.get(h.memory.id),
                                frozenset(
                                    wanted & set(_evidence(h.memory.metadata.get("evidence")))
                                ),
                                len(h.memory.content) + len(h.memory.type.value) + 4,
                            )
                            for h in hits
                        ],
                    }
                rows.append(row)
            print(f"{conv.sample_id}: {len(rows)} questions", file=sys.stderr)
    return rows


def score(
    rows: list[dict[str, Any]], mode: str, cfg: Any, convs: set[str] | None = None
) -> dict[str, float]:
    n = items = citing = chars = 0
    recall = 0.0
    for row in rows:
        if convs is not None and row["conv"] not in convs:
            continue
        data = row[mode]
        ev = LegScores(top_bm25=data["top"], best_cosine=data["best"])
        covered: set[str] = set()
        for ranks, cos, bm25, cited, length in data["hits"]:
            ok, _ = decide(ranks, cos, bm25, ev, cfg)
            if not ok:
                continue
            items += 1
            citing += bool(cited)
            covered |= cited
            chars += length
        recall += len(covered) / len(row["wanted"])
        n += 1
    return {
        "items": items / max(n, 1),
        "precision": citing / max(items, 1),
        "recall": recall / max(n, 1),
        "chars": chars / max(n, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--home", required=True)
    parser.add_argument("-c", "--conversations", default=None)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--depth", type=int, default=None, help="candidates per leg")
    parser.add_argument("--tune", default=None, help="conversations of the tune split (names)")
    args = parser.parse_args()
    cache = Path(args.cache)
    if cache.exists():
        rows = pickle.loads(cache.read_bytes())
    else:
        rows = collect(args)
        cache.write_bytes(pickle.dumps(rows))
    base = Settings.load(args.home).injection
    off = base.model_copy(update={"cut": False})
    for mode in MODES:
        s = score(rows, mode, off)
        print(
            f"{mode:7s} no cut: items {s['items']:.2f} prec {s['precision']:.3f} rec {s['recall']:.4f} chars {s['chars']:.0f}"
        )
    print("mode gap rel floor -> items precision recall chars")
    for gap, rel, floor in itertools.product(
        (0.03, 0.05, 0.07, 0.1, 0.13, 0.16, 0.2), (0.2, 0.3, 0.4, 0.5, 0.6, 0.8), (0.0, 0.69, 1.5)
    ):
        cfg = base.model_copy(
            update={
                "cut": True,
                "cut_cosine_gap": gap,
                "cut_bm25_relative": rel,
                "cut_bm25_floor": floor,
            }
        )
        s = score(rows, "hybrid", cfg)
        line = f"hybrid {gap:.2f} {rel:.1f} {floor:.2f} -> {s['items']:.2f} {s['precision']:.3f} {s['recall']:.4f} {s['chars']:.0f}"
        if args.tune:
            t = score(rows, "hybrid", cfg, set(args.tune.split(",")))
            line += f" | tune {t['items']:.2f} {t['recall']:.4f}"
        print(line)
    cfg = base.model_copy(update={"cut": True})
    for mode in MODES:
        s = score(rows, mode, cfg)
        print(
            f"{mode:7s} defaults: items {s['items']:.2f} prec {s['precision']:.3f} rec {s['recall']:.4f} chars {s['chars']:.0f}"
        )


if __name__ == "__main__":
    main()
