"""Calibrate the write-path thresholds (``replace``, ``gray_low``) for the default embedding model.

Data (see ``../shared/data/README.md``): PAWS dev (``label`` 1 = duplicate) and STS-B dev
(``score`` >= 4.0 = duplicate). Each pair is embedded with the default model (all-MiniLM-L6-v2,
offline, CPU) as the write path embeds it (:class:`memlane.embeddings.LocalEmbedder`), cosine is
taken on the unit vectors, and the no-LLM rule of the write path
(``ARCHITECTURE.md``, "Write path") is simulated for each ``replace`` threshold of the grid:

    duplicate  iff  (cos >= auto_reject and verdict == same)
                 or (cos >= replace and verdict in {same, extends})

where ``verdict`` comes from :func:`memlane.dedup.guard.compare` (existing = sentence1,
new = sentence2). For comparison the cosine-only rule ``cos >= t`` is printed too (it is what the
gray zone sends to an LLM: recall there tells where ``gray_low`` should sit). "swaps" counts the
PAWS label-0 pairs whose two sentences have the same multiset of words (105 pairs) that a rule
marks duplicate: a wrong merge of a swapped fact. It must be 0 for the chosen rule.

Run from the repository root: ``PYTHONPATH=src .venv/bin/python scripts/calibrate.py``
(``--json`` for machine-readable output).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memlane._text import normalise  # noqa: E402
from memlane.dedup.guard import GuardVerdict, compare  # noqa: E402
from memlane.embeddings import Embedder, LocalEmbedder, embed_texts  # noqa: E402

MERGE_VERDICTS = frozenset({GuardVerdict.SAME, GuardVerdict.EXTENDS})


@dataclass(frozen=True)
class Pair:
    """One labelled pair: ``existing``/``new`` texts, gold ``duplicate``, and ``same_words`` (the
    same multiset of normalised words; PAWS only)."""

    existing: str
    new: str
    duplicate: bool
    same_words: bool = False

    @property
    def swap(self) -> bool:
        """Label 0 with the same words: merging it would be the wrong merge of a swapped fact."""
        return self.same_words and not self.duplicate


def _read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def load_paws(data: Path) -> list[Pair]:
    """PAWS dev pairs, with ``same_words`` set."""
    return [
        Pair(
            row["sentence1"],
            row["sentence2"],
            row["label"] == "1",
            Counter(normalise(row["sentence1"]).split())
            == Counter(normalise(row["sentence2"]).split()),
        )
        for row in _read_tsv(data / "paws" / "paws_dev.tsv")
    ]


def load_stsb(data: Path) -> list[Pair]:
    """STS-B dev pairs; duplicate = score >= 4.0."""
    return [
        Pair(row["sentence1"], row["sentence2"], float(row["score"]) >= 4.0)
        for row in _read_tsv(data / "stsb" / "stsb_dev.tsv")
    ]


def cosines(embedder: Embedder, pairs: Sequence[Pair]) -> list[float]:
    """Cosine of each pair, from the embedder's unit vectors."""
    texts = sorted({t for p in pairs for t in (p.existing, p.new)})
    vectors = embed_texts(embedder, texts)
    index = {t: i for i, t in enumerate(texts)}
    return [float(vectors[index[p.existing]] @ vectors[index[p.new]]) for p in pairs]


def scores(predicted: Sequence[bool], pairs: Sequence[Pair]) -> dict[str, float | int]:
    """Precision, recall, F1, merged count and swap pairs merged for one rule."""
    tp = sum(1 for p, g in zip(predicted, pairs, strict=True) if p and g.duplicate)
    fp = sum(1 for p, g in zip(predicted, pairs, strict=True) if p and not g.duplicate)
    fn = sum(1 for p, g in zip(predicted, pairs, strict=True) if not p and g.duplicate)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    swaps = sum(1 for p, g in zip(predicted, pairs, strict=True) if p and g.swap)
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "merged": tp + fp,
        "false_merges": fp,
        "swaps": swaps,
    }


def grid(low: float, high: float, step: float = 0.01) -> list[float]:
    n = round((high - low) / step)
    return [round(low + i * step, 2) for i in range(n + 1)]


def evaluate(
    pairs: Sequence[Pair], cos: Sequence[float], auto_reject: float, cos_low: float
) -> dict[str, Any]:
    verdicts = [compare(p.existing, p.new).verdict for p in pairs]
    guarded = []
    for t in grid(0.80, 0.98):
        predicted = [
            (c >= auto_reject and v is GuardVerdict.SAME) or (c >= t and v in MERGE_VERDICTS)
            for c, v in zip(cos, verdicts, strict=True)
        ]
        guarded.append({"replace": t, **scores(predicted, pairs)})
    cosine_only = [
        {"threshold": t, **scores([c >= t for c in cos], pairs)} for t in grid(cos_low, 0.98)
    ]
    verdict_counts: dict[str, dict[str, int]] = {}
    for v, p in zip(verdicts, pairs, strict=True):
        row = verdict_counts.setdefault(v.value, {"duplicate": 0, "not_duplicate": 0})
        row["duplicate" if p.duplicate else "not_duplicate"] += 1
    dup_cos = sorted(c for c, p in zip(cos, pairs, strict=True) if p.duplicate)
    non_cos = sorted(c for c, p in zip(cos, pairs, strict=True) if not p.duplicate)
    result: dict[str, Any] = {
        "pairs": len(pairs),
        "duplicates": sum(p.duplicate for p in pairs),
        "median_cos_duplicate": round(statistics.median(dup_cos), 4),
        "median_cos_not_duplicate": round(statistics.median(non_cos), 4),
        "verdicts": verdict_counts,
        "guarded": guarded,
        "cosine_only": cosine_only,
    }
    swap_cos = sorted(c for c, p in zip(cos, pairs, strict=True) if p.swap)
    if swap_cos:
        bag_cos = [c for c, p in zip(cos, pairs, strict=True) if p.same_words]
        result["swap_pairs"] = {
            "count": len(swap_cos),
            "median_cos": round(statistics.median(swap_cos), 4),
            "min_cos": round(swap_cos[0], 4),
            "at_or_above_0.95": sum(c >= 0.95 for c in swap_cos),
            "same_multiset_pairs_all_labels": len(bag_cos),
            "same_multiset_median_cos_all_labels": round(statistics.median(bag_cos), 4),
            "same_multiset_min_cos_all_labels": round(min(bag_cos), 4),
        }
    return result


def print_report(name: str, res: dict[str, Any]) -> None:
    print(f"\n=== {name}: {res['pairs']} pairs, {res['duplicates']} duplicates ===")
    print(
        f"median cosine: duplicates {res['median_cos_duplicate']:.4f}, "
        f"non-duplicates {res['median_cos_not_duplicate']:.4f}"
    )
    if "swap_pairs" in res:
        s = res["swap_pairs"]
        print(
            f"swap pairs (label 0, same word multiset): {s['count']}, median cosine "
            f"{s['median_cos']:.4f}, min {s['min_cos']:.4f}, >= 0.95: {s['at_or_above_0.95']}; "
            f"all {s['same_multiset_pairs_all_labels']} same-multiset pairs: median "
            f"{s['same_multiset_median_cos_all_labels']:.4f}, "
            f"min {s['same_multiset_min_cos_all_labels']:.4f}"
        )
    print("guard verdicts (duplicate / not duplicate):")
    for verdict, row in sorted(res["verdicts"].items()):
        print(f"  {verdict:<17}{row['duplicate']:>6}{row['not_duplicate']:>6}")
    header = f"{'':>9}{'prec':>8}{'recall':>8}{'F1':>8}{'merged':>8}{'wrong':>7}{'swaps':>7}"
    for title, key, rows in (
        ("guarded rule (cos >= replace and verdict in {same, extends})", "replace", res["guarded"]),
        ("cosine-only rule (cos >= t)", "threshold", res["cosine_only"]),
    ):
        print(f"{title}:\n{key:>9}{header[9:]}")
        for r in rows:
            print(
                f"{r[key]:>9.2f}{r['precision']:>8.3f}{r['recall']:>8.3f}{r['f1']:>8.3f}"
                f"{r['merged']:>8}{r['false_merges']:>7}{r['swaps']:>7}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--auto-reject", type=float, default=0.98)
    parser.add_argument("--cos-low", type=float, default=0.70, help="lowest cosine-only threshold")
    args = parser.parse_args(argv)

    embedder = LocalEmbedder()  # offline, CPU (it sets HF_HUB_OFFLINE unless already set)
    results = {}
    for name, loader in (("paws_dev", load_paws), ("stsb_dev", load_stsb)):
        pairs = loader(args.data)
        results[name] = evaluate(pairs, cosines(embedder, pairs), args.auto_reject, args.cos_low)

    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    else:
        for name, res in results.items():
            print_report(name, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
