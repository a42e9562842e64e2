"""CLI commands for write-time deduplication: ``memlane dedup pairs`` (evaluation on labelled
sentence pairs; the ``dedup-log`` command lives with the other memory commands)."""

from __future__ import annotations

import csv
import json
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.text import Text

from memlane._text import normalise
from memlane.cli.app import (
    HomeOption,
    JsonOption,
    app,
    err,
    fail,
    handle_errors,
    print_json,
    progress_bar,
)
from memlane.cli.render import command, decision_text, table
from memlane.config import Settings
from memlane.engine import MemoryEngine, MemoryInput
from memlane.errors import InvalidMemory
from memlane.types import Decision, WriteResult

#: Items offered per ``add_many`` call (one transaction and one embedding batch each).
PAIRS_CHUNK = 256
#: ``--id-column`` value that numbers the rows 1, 2, ... instead of reading a column.
ROW_NUMBER = "#"
#: STS-style ``score`` column: a pair is a duplicate when its score is at least this.
SCORE_DUPLICATE = 4.0

dedup_app = typer.Typer(
    name="dedup",
    help="Write-time deduplication: measure the write path on labelled sentence pairs.",
    no_args_is_help=True,
)
app.add_typer(dedup_app, name="dedup")


@dataclass
class _Row:
    n: int
    id: str
    s1: str
    s2: str
    gold: bool | None
    error: str | None = None
    result: WriteResult | None = None
    similarity: float | None = None


def _gold(row: dict[str | Any, Any], column: str | None) -> bool | None:
    """The reference label of a row: ``label`` (1 = same meaning) or ``score`` (>= 4.0)."""
    if column is None:
        return None
    raw = row.get(column)
    try:
        value = float(str(raw).strip())
    except ValueError:
        return None
    return value >= SCORE_DUPLICATE if column == "score" else value >= 0.5


def _read_pairs(file: Path, id_column: str, limit: int | None) -> tuple[list[_Row], str | None]:
    """Rows of the TSV and the name of its reference column (``label``, ``score`` or None)."""
    try:
        handle = file.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror or exc}") from None
    rows: list[_Row] = []
    with handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        try:
            header = [h.strip() for h in reader.fieldnames or []]
        except (csv.Error, UnicodeDecodeError) as exc:
            raise fail(f"{file}: cannot read the header line: {exc}") from None
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
            raise fail(
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
                row = _Row(n, ident, s1 or "", s2 or "", _gold(raw, label_column))
                if s1 is None or s2 is None:
                    row.error = "the row has fewer tab-separated fields than the header"
                rows.append(row)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise fail(f"{file}, data row {len(rows) + 1}: {exc}") from None
    return rows, label_column


def _same_words(a: str, b: str) -> bool:
    """The same words in any order (after the write path's :func:`normalise`)."""
    return sorted(normalise(a).split()) == sorted(normalise(b).split())


def _offer(
    engine: MemoryEngine, rows: Sequence[_Row], texts: Sequence[str], label: str, progress: Any
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


def _metrics(rows: Sequence[_Row]) -> dict[str, Any]:
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
    swaps = [r for r in scored if r.gold is False and _same_words(r.s1, r.s2)]
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


@command(dedup_app, "pairs")
def pairs(
    file: Annotated[
        Path,
        typer.Argument(
            help="Tab-separated file with a header: id, sentence1, sentence2 (label or score "
            "optional).",
            show_default=False,
        ),
    ],
    out_file: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output JSONL: one line per row.", show_default=False),
    ],
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the first N rows.")
    ] = None,
    id_column: Annotated[
        str,
        typer.Option(
            "--id-column",
            help=f"Column naming each row ('{ROW_NUMBER}' numbers the rows 1, 2, ...).",
        ),
    ] = "id",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """The write path's decision for sentence2 offered to a store holding only sentence1.

    Each row gets its own scope in a throwaway store (a temporary folder; your store is never
    touched) with the settings of --home: thresholds, embedding model. One JSON line per row:
    {"id", "similarity", "decision", "duplicate"}; duplicate is true when sentence2 would not be
    stored as a memory of its own (hash_exact, auto_reject, replaced, llm_merge, llm_reject,
    fallback_reject); similarity is the cosine of the two sentences (1.0 for hash_exact). A row
    that cannot be offered (an empty sentence, missing fields) gets decision "invalid".

    A summary goes to stderr (and to stdout as JSON with --json). When the file has a label
    column (1 = same meaning) or a score column (duplicate when score >= 4.0, as in STS-B), the
    summary has the precision and recall of "duplicate", and how many label-0 pairs made of the
    same words in another order were marked duplicate.

    Example:  memlane dedup pairs examples/pairs.tsv --out decisions.jsonl
    """
    started = time.perf_counter()
    rows, label_column = _read_pairs(file, id_column, limit)
    with handle_errors():
        settings = Settings.load(home)
        with tempfile.TemporaryDirectory(prefix="memlane-pairs-") as tmp:
            store = settings.store.model_copy(update={"path": str(Path(tmp) / "pairs.db")})
            scratch = settings.model_copy(update={"store": store})
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
                with progress_bar() as progress:
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
    try:
        out_file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {out_file}: {exc.strerror or exc}") from None

    decisions = Counter("invalid" if r.result is None else r.result.decision.value for r in rows)
    summary: dict[str, Any] = {
        "file": str(file),
        "out": str(out_file),
        "rows": len(rows),
        "invalid": decisions.get("invalid", 0),
        "duplicates": sum(1 for r in rows if r.result is not None and r.result.duplicate),
        "decisions": dict(decisions.most_common()),
        "labels": label_column,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if label_column is not None:
        summary["metrics"] = _metrics(rows)
    _print_summary(summary, [r for r in rows if r.error is not None])
    if as_json:
        print_json(summary)


def _print_summary(summary: dict[str, Any], bad: Sequence[_Row]) -> None:
    for row in bad[:20]:
        err.print(
            Text.assemble(
                ("warning:", "yellow"), f" row {row.n} (id {row.id}) not offered: {row.error}"
            )
        )
    if len(bad) > 20:
        err.print(Text(f"... and {len(bad) - 20} more invalid rows", style="yellow"))
    err.print(Text(f"{summary['rows']} pairs from {summary['file']}", style="bold"))
    t = table()
    t.add_column("decision")
    t.add_column("rows", justify="right")
    t.add_column("duplicate")
    for decision, count in summary["decisions"].items():
        if decision == "invalid":
            t.add_row(Text("invalid", style="red"), str(count), "-")
        else:
            t.add_row(
                decision_text(decision), str(count), "yes" if Decision(decision).duplicate else "no"
            )
    err.print(t)
    err.print(
        Text(
            f"{summary['duplicates']} of {summary['rows']} rows marked duplicate; "
            f"wrote {summary['out']} in {summary['seconds']} s"
        )
    )
    metrics = summary.get("metrics")
    if metrics:

        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3f}"

        reference = "label = 1" if summary["labels"] == "label" else f"score >= {SCORE_DUPLICATE}"
        err.print(
            Text(
                f"against {reference} ({metrics['labelled']} labelled rows, "
                f"{metrics['positives']} duplicates): precision {fmt(metrics['precision'])}, "
                f"recall {fmt(metrics['recall'])}, F1 {fmt(metrics['f1'])} "
                f"(tp {metrics['tp']}, fp {metrics['fp']}, fn {metrics['fn']}, "
                f"tn {metrics['tn']})"
            )
        )
        if metrics["same_words_label0"]:
            err.print(
                Text(
                    f"label-0 pairs with the same words in another order: "
                    f"{metrics['same_words_label0_duplicate']} of "
                    f"{metrics['same_words_label0']} marked duplicate"
                )
            )
