"""Labelled-pair evaluation of the write path (``memlane dedup pairs``): each pair's sentence2 is
offered to a throwaway store holding only its sentence1, and the write path's decision is scored
against the pair's label.

Input: a tab-separated file with a header naming at least an id column, ``sentence1`` and
``sentence2``, and optionally ``label`` (PAWS: 1 = same meaning) or ``score`` (STS-B: 0..5, a
duplicate when >= :data:`SCORE_DUPLICATE`). The data sets are described in
``../shared/data/README.md``; the figures they give are in docs/dedup.md.
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memlane._text import normalise
from memlane.config import Settings
from memlane.engine import MemoryEngine, MemoryInput
from memlane.errors import ConfigError, InvalidArgument, InvalidMemory
from memlane.types import WriteResult

#: Items offered per ``add_many`` call (one transaction and one embedding batch each).
PAIRS_CHUNK = 256
#: ``--id-column`` value that numbers the rows 1, 2, ... instead of reading a column.
ROW_NUMBER = "#"
#: STS-style ``score`` column: a pair is a duplicate when its score is at least this (STS-B's
#: 4 = "mostly equivalent", the threshold docs/dedup.md uses).
SCORE_DUPLICATE = 4.0


class TaskProgress(Protocol):
    """What :func:`evaluate` reports progress to (a :class:`rich.progress.Progress` fits)."""

    def add_task(self, description: str, *, total: float | None = ...) -> Any: ...

    def advance(self, task_id: Any, advance: float = ...) -> None: ...


@dataclass
class PairRow:
    """One row of the file: ``n`` its 1-based data row number, ``id`` its name, ``gold`` the
    reference label (None without a label column or an unreadable one); ``error`` why it was not
    offered, ``result`` the write path's decision for sentence2 and ``similarity`` the cosine of
    the two sentences, once :func:`evaluate` ran."""

    n: int
    id: str
    s1: str
    s2: str
    gold: bool | None
    error: str | None = None
    result: WriteResult | None = None
    similarity: float | None = None


def gold_label(row: dict[str | Any, Any], column: str | None) -> bool | None:
    """The reference label of a row: ``label`` (1 = same meaning) or ``score`` (>= 4.0)."""
    if column is None:
        return None
    raw = row.get(column)
    try:
        value = float(str(raw).strip())
    except ValueError:
        return None
    return value >= SCORE_DUPLICATE if column == "score" else value >= 0.5


def read_pairs(
    file: Path, id_column: str = "id", limit: int | None = None
) -> tuple[list[PairRow], str | None]:
    """Rows of the TSV (the first ``limit`` when given) and the name of its reference column
    (``label``, ``score`` or None). Rows with fewer fields than the header get an ``error``.

    Raises:
        InvalidArgument: the file cannot be read, or lacks a required column.
    """
    try:
        handle = file.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise InvalidArgument(f"cannot read {file}: {exc.strerror or exc}") from None
    rows: list[PairRow] = []
    with handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        try:
            header = [h.strip() for h in reader.fieldnames or []]
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{file}: cannot read the header line: {exc}") from None
        reader.fieldnames = header
        required = ["sentence1", "sentence2"]
        if id_column != ROW_NUMBER:
            required.insert(0, id_column)
        missing = [c for c in required if c not in header]
        if missing:
            hint = (
                f" (or pass --id-column with one of the found columns, or --id-column "
                f"'{ROW_NUMBER}' to number the rows)"
                if id_column in missing
                else ""
            )
            raise InvalidArgument(
                f"{file} is missing the column(s) {', '.join(missing)}; found: "
                f"{', '.join(header) or 'no header'}. The first line must be a tab-separated "
                f"header with at least id, sentence1, sentence2{hint}"
            )
        label_column = "label" if "label" in header else "score" if "score" in header else None
        try:
            for n, raw in enumerate(reader, start=1):
                if limit is not None and n > limit:
                    break
                ident = str(n) if id_column == ROW_NUMBER else str(raw.get(id_column) or n)
                s1, s2 = raw.get("sentence1"), raw.get("sentence2")
                row = PairRow(n, ident, s1 or "", s2 or "", gold_label(raw, label_column))
                if s1 is None or s2 is None:
                    row.error = "the row has fewer tab-separated fields than the header"
                rows.append(row)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{file}, data row {len(rows) + 1}: {exc}") from None
    return rows, label_column


def same_words(a: str, b: str) -> bool:
    """The same words in any order (after the write path's :func:`normalise`)."""
    return sorted(normalise(a).split()) == sorted(normalise(b).split())


def _offer(
    engine: MemoryEngine,
    rows: Sequence[PairRow],
    texts: Sequence[str],
    label: str,
    progress: TaskProgress,
) -> list[WriteResult]:
    task = progress.add_task(label, total=len(rows))
    results: list[WriteResult] = []
    for start in range(0, len(rows), PAIRS_CHUNK):
        chunk = rows[start : start + PAIRS_CHUNK]
        items = [
            MemoryInput(text, owner=f"pair:{row.n}", source="dedup-pairs")
            for row, text in zip(chunk, texts[start : start + PAIRS_CHUNK], strict=True)
        ]
        results.extend(engine.add_many(items))
        progress.advance(task, len(chunk))
    return results


def evaluate(
    rows: Sequence[PairRow], settings: Settings, progress: TaskProgress, *, llm: bool = False
) -> dict[str, Any]:
    """Offer every valid row to the write path, in place: each row gets its own scope
    (``pair:<n>``) in a throwaway store (a temporary folder) with ``settings``' thresholds and
    embedding model; sentence1 of all rows first, then sentence2. Sets ``error`` on rows the
    write path refuses, ``result`` and ``similarity`` on the others (the cosine of the two
    sentences when the write path found no memory near sentence2).

    ``llm``: the gray zone asks the model of ``settings``' ``[llm]`` (else no model is asked,
    whatever is configured). Returns the LLM's counters (:meth:`MemoryEngine.llm_stats`).

    Raises:
        ConfigError: ``llm`` without ``[llm] provider`` set.
    """
    if llm and settings.llm.provider == "none":
        raise ConfigError(
            "llm.provider",
            "none",
            "dedup pairs --llm needs an LLM: set [llm] provider (and model) in memlane.toml "
            "or MEMLANE_LLM__PROVIDER",
        )
    with tempfile.TemporaryDirectory(prefix="memlane-pairs-") as tmp:
        store = settings.store.model_copy(update={"path": str(Path(tmp) / "pairs.db")})
        model = settings.llm if llm else settings.llm.model_copy(update={"provider": "none"})
        scratch = settings.model_copy(update={"store": store, "llm": model})
        with MemoryEngine.open(settings=scratch) as engine:
            for row in rows:
                if row.error is not None:
                    continue
                try:
                    for text in (row.s1, row.s2):
                        engine.validate(MemoryInput(text, owner=f"pair:{row.n}"))
                except InvalidMemory as exc:
                    row.error = str(exc)
            valid = [r for r in rows if r.error is None]
            _offer(engine, valid, [r.s1 for r in valid], "sentence1", progress)
            results = _offer(engine, valid, [r.s2 for r in valid], "sentence2", progress)
            for row, offered in zip(valid, results, strict=True):
                row.result = offered
                row.similarity = offered.similarity
            missing = [r for r in valid if r.similarity is None]
            if missing:  # nothing near: compute the cosine of the two sentences here
                first = engine.embed([r.s1.strip() for r in missing])
                second = engine.embed([r.s2.strip() for r in missing])
                for row, cos in zip(missing, np.sum(first * second, axis=1), strict=True):
                    row.similarity = float(cos)
            return engine.llm_stats()


def decision_lines(rows: Sequence[PairRow]) -> list[str]:
    """One JSON line per row: ``{"id", "similarity", "decision", "duplicate"}`` (decision
    ``"invalid"`` for a row not offered)."""
    lines = []
    for row in rows:
        res = row.result
        lines.append(
            json.dumps(
                {
                    "id": row.id,
                    "similarity": None if row.similarity is None else round(row.similarity, 6),
                    "decision": "invalid" if res is None else res.decision.value,
                    "duplicate": False if res is None else res.duplicate,
                },
                ensure_ascii=False,
            )
        )
    return lines


def metrics(rows: Sequence[PairRow]) -> dict[str, Any]:
    """Precision, recall and F1 of "duplicate" over the labelled rows that were offered, and how
    many label-0 pairs made of the same words (a swapped fact) were marked duplicate."""
    scored = [r for r in rows if r.gold is not None and r.result is not None]
    tp = sum(1 for r in scored if r.gold and r.result and r.result.duplicate)
    fp = sum(1 for r in scored if not r.gold and r.result and r.result.duplicate)
    fn = sum(1 for r in scored if r.gold and r.result and not r.result.duplicate)
    tn = len(scored) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall
        else None
    )
    swaps = [r for r in scored if r.gold is False and same_words(r.s1, r.s2)]
    return {
        "labelled": len(scored),
        "positives": tp + fn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": None if precision is None else round(precision, 4),
        "recall": None if recall is None else round(recall, 4),
        "f1": None if f1 is None else round(f1, 4),
        "same_words_label0": len(swaps),
        "same_words_label0_duplicate": sum(1 for r in swaps if r.result and r.result.duplicate),
    }
