"""Calibrate the write-path thresholds (``replace``, ``gray_low``) on labelled pairs:
``memlane dedup calibrate``.

Data (see ``../shared/data/README.md``): PAWS dev (``label`` 1 = duplicate) and STS-B dev
(``score`` >= 4.0 = duplicate), read by :func:`memlane.eval.pairs.read_pairs`. Each pair is
embedded with the embedder the settings select (the default model, all-MiniLM-L6-v2, unless
``[embedding]`` says otherwise), and the cosine is taken on the unit vectors as the store's
nearest-neighbour search does. Then, for every ``replace`` threshold of the grid 0.80..0.98, the
write path's own decision is taken for sentence2 offered against sentence1:

- the same content hash -> ``hash_exact`` (as ``MemoryEngine._write_one`` checks first);
- otherwise :func:`memlane.dedup.pipeline.decide` with the settings' ``[dedup]`` section, its
  ``replace`` set to the threshold (``gray_low`` lowered to it when above), and no LLM.

A pair is marked duplicate when the decision is (:attr:`memlane.types.Decision.duplicate`). For
comparison the cosine-only rule ``cos >= t`` is reported too (it is what the gray zone would send
to an LLM: its recall tells where ``gray_low`` should sit). "swaps" counts the label-0 pairs whose
two sentences have the same multiset of words (105 in PAWS dev) that a rule marks duplicate: a
wrong merge of a swapped fact. It must be 0 at the chosen thresholds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memlane._text import content_hash
from memlane.config import DedupSettings
from memlane.dedup.guard import compare
from memlane.dedup.pipeline import decide
from memlane.embeddings import Embedder, embed_texts
from memlane.embeddings.profiles import MINILM, Profile
from memlane.eval.pairs import ROW_NUMBER, PairRow, read_pairs, same_words
from memlane.types import Decision, Memory, MemoryType, Status

#: The files swept by default, relative to the data folder (the layout of ``../shared/data``).
DEFAULT_FILES = ("paws/paws_dev.tsv", "stsb/stsb_dev.tsv")
#: ``replace`` thresholds swept (the defaults' neighbourhood: docs/dedup.md).
REPLACE_LOW, REPLACE_HIGH = 0.80, 0.98
#: Highest cosine-only threshold (the lowest is ``cos_low``).
COSINE_HIGH = 0.98


@dataclass(frozen=True, slots=True)
class Pair:
    """One labelled pair: ``existing`` (sentence1, the stored memory) and ``new`` (sentence2, the
    offered text), gold ``duplicate``, and ``same_words`` (the same multiset of normalised words)."""

    existing: str
    new: str
    duplicate: bool
    same_words: bool = False

    @property
    def swap(self) -> bool:
        """Label 0 with the same words: merging it would be the wrong merge of a swapped fact."""
        return self.same_words and not self.duplicate


def load_pairs(file: Path) -> list[Pair]:
    """The labelled pairs of a TSV (rows without a label, or with a missing field, left out; ids
    are not needed, so the file needs no id column).

    Raises:
        InvalidArgument: the file cannot be read or lacks a column.
    """
    rows, _ = read_pairs(file, ROW_NUMBER)
    return [_pair(r) for r in rows if r.error is None and r.gold is not None]


def _pair(row: PairRow) -> Pair:
    existing, new = row.s1.strip(), row.s2.strip()  # as the write path's validation strips
    return Pair(existing, new, bool(row.gold), same_words(existing, new))


def cosines(embedder: Embedder, pairs: Sequence[Pair]) -> list[float]:
    """Cosine of each pair, from the embedder's unit vectors (each distinct text embedded once)."""
    texts = sorted({t for p in pairs for t in (p.existing, p.new)})
    vectors = embed_texts(embedder, texts)
    index = {t: i for i, t in enumerate(texts)}
    return [float(vectors[index[p.existing]] @ vectors[index[p.new]]) for p in pairs]


_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def _stored(text: str) -> Memory:
    """``text`` as the one memory in the pair's scope (only its content matters to ``decide``)."""
    return Memory(
        id="calibration",
        content=text,
        type=MemoryType.FACT,
        importance=0.6,
        owner="calibration",
        agent=None,
        session=None,
        source=None,
        created_at=_EPOCH,
        updated_at=_EPOCH,
        last_accessed_at=None,
        access_count=0,
        confirmations=0,
        content_hash=content_hash(text),
        status=Status.ACTIVE,
    )


def write_decision(pair: Pair, cosine: float, settings: DedupSettings) -> Decision:
    """The write path's decision (no LLM) for ``pair.new`` offered to a scope holding only
    ``pair.existing`` at ``cosine``: the content-hash check, then :func:`decide`."""
    if content_hash(pair.new) == content_hash(pair.existing):
        return Decision.HASH_EXACT
    return decide(pair.new, _stored(pair.existing), cosine, settings).decision


def with_replace(settings: DedupSettings, replace: float) -> DedupSettings:
    """``settings`` with ``replace`` set (and ``gray_low`` lowered to it when above it)."""
    return settings.model_copy(
        update={"replace": replace, "gray_low": min(settings.gray_low, replace)}
    )


def scores(predicted: Sequence[bool], pairs: Sequence[Pair]) -> dict[str, float | int]:
    """Precision (1.0 when nothing is marked), recall, F1, merged count, wrong merges and swap
    pairs merged for one rule."""
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
    """``low, low + step, ... high`` rounded to 2 decimals."""
    n = round((high - low) / step)
    return [round(low + i * step, 2) for i in range(n + 1)]


def evaluate(
    pairs: Sequence[Pair], cos: Sequence[float], settings: DedupSettings, cos_low: float
) -> dict[str, Any]:
    """The sweep for one file: cosine medians, guard verdicts by label, the write path's
    decisions at ``settings`` and, per ``replace`` of the grid, the scores of the write path's
    decision (``write_path``) and of the cosine-only rule (``cosine_only``); ``swap_pairs`` when
    the file has any. ``pairs`` must not be empty."""
    write_path = []
    for t in grid(REPLACE_LOW, REPLACE_HIGH):
        swept = with_replace(settings, t)
        predicted = [write_decision(p, c, swept).duplicate for p, c in zip(pairs, cos, strict=True)]
        write_path.append({"replace": t, **scores(predicted, pairs)})
    cosine_only = [
        {"threshold": t, **scores([c >= t for c in cos], pairs)} for t in grid(cos_low, COSINE_HIGH)
    ]
    verdict_counts: dict[str, dict[str, int]] = {}
    decision_counts: dict[str, dict[str, int]] = {}
    for p, c in zip(pairs, cos, strict=True):
        label = "duplicate" if p.duplicate else "not_duplicate"
        verdict = compare(p.existing, p.new).verdict.value
        decision = write_decision(p, c, settings).value
        for counts, key in ((verdict_counts, verdict), (decision_counts, decision)):
            counts.setdefault(key, {"duplicate": 0, "not_duplicate": 0})[label] += 1
    dup_cos = sorted(c for c, p in zip(cos, pairs, strict=True) if p.duplicate)
    non_cos = sorted(c for c, p in zip(cos, pairs, strict=True) if not p.duplicate)
    result: dict[str, Any] = {
        "pairs": len(pairs),
        "duplicates": sum(p.duplicate for p in pairs),
        "median_cos_duplicate": round(statistics.median(dup_cos), 4) if dup_cos else None,
        "median_cos_not_duplicate": round(statistics.median(non_cos), 4) if non_cos else None,
        "settings": settings.model_dump(include={"auto_reject", "replace", "gray_low"}),
        "verdicts": verdict_counts,
        "decisions": decision_counts,
        "write_path": write_path,
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


def _median(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def report_lines(name: str, res: dict[str, Any]) -> list[str]:
    """The sweep of one file as text lines (what ``memlane dedup calibrate`` prints)."""
    lines = [
        "",
        f"=== {name}: {res['pairs']} pairs, {res['duplicates']} duplicates ===",
        f"median cosine: duplicates {_median(res['median_cos_duplicate'])}, "
        f"non-duplicates {_median(res['median_cos_not_duplicate'])}",
    ]
    if "swap_pairs" in res:
        s = res["swap_pairs"]
        lines.append(
            f"swap pairs (label 0, same word multiset): {s['count']}, median cosine "
            f"{s['median_cos']:.4f}, min {s['min_cos']:.4f}, >= 0.95: {s['at_or_above_0.95']}; "
            f"all {s['same_multiset_pairs_all_labels']} same-multiset pairs: median "
            f"{s['same_multiset_median_cos_all_labels']:.4f}, "
            f"min {s['same_multiset_min_cos_all_labels']:.4f}"
        )
    thresholds = ", ".join(f"{k} {v}" for k, v in res["settings"].items())
    for title, key in (("guard verdicts", "verdicts"), (f"decisions at {thresholds}", "decisions")):
        lines.append(f"{title} (duplicate / not duplicate):")
        for value, row in sorted(res[key].items()):
            lines.append(f"  {value:<17}{row['duplicate']:>6}{row['not_duplicate']:>6}")
    header = f"{'prec':>8}{'recall':>8}{'F1':>8}{'merged':>8}{'wrong':>7}{'swaps':>7}"
    for title, key, rows in (
        ("write path, no LLM (hash check + decide(), replace swept)", "replace", res["write_path"]),
        ("cosine-only rule (cos >= t)", "threshold", res["cosine_only"]),
    ):
        lines.append(f"{title}:")
        lines.append(f"{key:>9}{header}")
        for r in rows:
            lines.append(
                f"{r[key]:>9.2f}{r['precision']:>8.3f}{r['recall']:>8.3f}{r['f1']:>8.3f}"
                f"{r['merged']:>8}{r['false_merges']:>7}{r['swaps']:>7}"
            )
    return lines


#: Precision the chosen ``replace`` must reach on each file (write path, no LLM), with no swap
#: pair merged: the smallest ``replace`` of the grid that does is chosen. 0.985 / 0.99 reproduce
#: the hand-chosen all-MiniLM-L6-v2 value, 0.97 (docs/dedup.md: precision first).
REPLACE_PRECISION = {"paws": 0.985, "stsb": 0.99}
#: Share of STS-B duplicates the gray zone must hold: ``gray_low`` is the highest cosine with at
#: least this recall under the cosine-only rule (docs/dedup.md: "0.80 of the true duplicates", to
#: two decimals: the int8 MiniLM holds 0.799 at 0.80, the fp32 one 0.80).
GRAY_RECALL = 0.795


def _by_prefix(results: dict[str, Any], prefix: str) -> dict[str, Any]:
    for name, res in results.items():
        if name.startswith(prefix):
            return dict(res)
    raise ValueError(f"no {prefix} results: calibrate on paws/paws_dev.tsv and stsb/stsb_dev.tsv")


def derive_profile(
    model: str,
    dimension: int,
    results: dict[str, Any],
    *,
    query_prefix: str = "",
    passage_prefix: str = "",
) -> Profile:
    """The profile of ``model`` from :func:`evaluate` results on PAWS dev and STS-B dev (keys
    starting ``paws`` / ``stsb``; both swept with a ``cos_low`` low enough for ``gray_low``).

    Rules (each reproduces the all-MiniLM-L6-v2 choices of docs/dedup.md and docs/replay.md):

    - ``replace``: the smallest grid value whose write-path precision reaches
      :data:`REPLACE_PRECISION` on both files with no swap pair merged and some PAWS pair
      merged (0.98 when none does);
      ``auto_reject`` = ``replace`` + 0.01 (at most 0.99).
    - ``gray_low``: the highest cosine-only threshold holding :data:`GRAY_RECALL` of the STS-B
      duplicates (at most ``replace``).
    - ``semantic_threshold``, ``floor_absolute``, ``floor_relative``: MiniLM's values (0.85,
      0.1, 0.5, tuned on its scale) carried to this model's scale by the affine map that sends
      MiniLM's two anchors (median cosine of STS-B non-duplicates and of duplicates) to this
      model's; the relative floor as the ratio of the mapped floor at MiniLM's duplicate median;
      ``cut_cosine_gap`` / ``cut_both_cosine_gap`` (distances) scaled by the same map's slope.

    Raises:
        ValueError: a file's results are missing.
    """
    paws, stsb = _by_prefix(results, "paws"), _by_prefix(results, "stsb")
    replace = REPLACE_HIGH
    for row_p, row_s in zip(paws["write_path"], stsb["write_path"], strict=True):
        if (
            row_p["precision"] >= REPLACE_PRECISION["paws"]
            and row_s["precision"] >= REPLACE_PRECISION["stsb"]
            and row_p["swaps"] == 0
            and row_s["swaps"] == 0
            and row_p["merged"] > 0
        ):
            replace = row_p["replace"]
            break
    held = [r["threshold"] for r in stsb["cosine_only"] if r["recall"] >= GRAY_RECALL]
    gray_low = min(max(held), replace) if held else replace
    lo, hi = float(stsb["median_cos_not_duplicate"]), float(stsb["median_cos_duplicate"])
    ref_lo, ref_hi = MINILM.cos_unrelated or lo, MINILM.cos_duplicate or hi

    def carried(value: float) -> float:
        return lo + (value - ref_lo) * (hi - lo) / (ref_hi - ref_lo)

    floor_absolute = round(max(-1.0, min(1.0, carried(MINILM.floor_absolute))), 2)
    floor_at = carried(MINILM.floor_relative * ref_hi) / carried(ref_hi)
    scale = (hi - lo) / (ref_hi - ref_lo)  # a distance on MiniLM's scale, on this model's
    return Profile(
        model=model,
        dimension=dimension,
        auto_reject=round(min(0.99, replace + 0.01), 2),
        replace=round(replace, 2),
        gray_low=round(gray_low, 2),
        semantic_threshold=round(min(0.99, carried(MINILM.semantic_threshold)), 2),
        floor_relative=round(max(0.0, min(1.0, floor_at)), 2),
        floor_absolute=floor_absolute,
        cut_cosine_gap=round(MINILM.cut_cosine_gap * scale, 3),
        cut_both_cosine_gap=round(MINILM.cut_both_cosine_gap * scale, 3),
        query_prefix=query_prefix,
        passage_prefix=passage_prefix,
        cos_unrelated=round(lo, 4),
        cos_duplicate=round(hi, 4),
        source="memlane dedup calibrate --profile",
    )


def profile_lines(profile: Profile) -> list[str]:
    """``profile`` as the ``memlane.toml`` lines that set it (what ``--profile`` prints)."""
    lines = [
        "",
        f"# profile of {profile.model} ({profile.dimension} dims): STS-B median cosine "
        f"non-duplicates {profile.cos_unrelated}, duplicates {profile.cos_duplicate}",
    ]
    for section, values in profile.settings().items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {value}" for key, value in values.items())
    lines.append(f"# prefixes: query {profile.query_prefix!r}, passage {profile.passage_prefix!r}")
    return lines
