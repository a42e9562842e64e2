"""CLI: ``memlane bench secrets``: recall and precision of :mod:`memlane.privacy`'s secret
rules on a labelled set (docs/security.md)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from memlane.cli.app import JsonOption, fail, handle_errors, out, print_json
from memlane.cli.bench import bench_app
from memlane.errors import InvalidArgument

#: The labelled set in the repository: 100 lines with a secret (20 kinds, 5 each) and 100
#: look-alikes (UUIDs, hashes, documentation examples, placeholders), one JSON object a line:
#: ``{"label": "secret" | "benign", "kind": ..., "text": ...}``.
DEFAULT_SET = Path("tests/data/secrets.jsonl")


def evaluate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Line-level recall and precision of :func:`memlane.privacy.find_secrets` on ``rows``, the
    lines missed and the look-alikes flagged, and whether each secret's kind was named right."""
    from memlane.privacy import find_secrets

    tp = fn = fp = right_kind = 0
    missed: list[str] = []
    flagged: list[str] = []
    by_kind: Counter[str] = Counter()
    for row in rows:
        found = find_secrets(str(row["text"]))
        if row["label"] == "secret":
            by_kind[str(row["kind"])] += 1
            if found:
                tp += 1
                right_kind += any(f.kind == row["kind"] for f in found)
            else:
                fn += 1
                missed.append(f"{row['kind']}: {row['text'][:60]}")
        elif found:
            fp += 1
            flagged.append(f"{found[0].kind}: {row['text'][:60]}")
    return {
        "bench": "secrets",
        "lines": len(rows),
        "secrets": tp + fn,
        "kinds": len(by_kind),
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "kind_named_right": round(right_kind / tp, 4) if tp else None,
        "missed": missed,
        "false_positives": flagged,
    }


@bench_app.command("secrets")
def secrets_cmd(
    data: Annotated[
        Path,
        typer.Option("--data", help="The labelled JSONL set (default: the repository's)."),
    ] = DEFAULT_SET,
    json_out: JsonOption = False,
) -> None:
    """Recall and precision of the secret rules on a labelled set (a line is a hit when any
    rule fires). Goal: both >= 0.95. Example: memlane bench secrets --data tests/data/secrets.jsonl
    """
    with handle_errors():
        try:
            rows = [json.loads(line) for line in data.read_text("utf-8").splitlines() if line]
        except (OSError, ValueError) as exc:
            raise InvalidArgument(f"cannot read the labelled set {str(data)!r}: {exc}") from None
        result = evaluate(rows)
        if json_out:
            print_json(result)
            return
        out.print(
            f"bench secrets: {result['lines']} lines, {result['secrets']} secrets of "
            f"{result['kinds']} kinds\nrecall {result['recall']}  precision "
            f"{result['precision']}  kind named right {result['kind_named_right']}"
        )
        for line in result["missed"]:
            out.print(f"missed: {line}", markup=False)
        for line in result["false_positives"]:
            out.print(f"false positive: {line}", markup=False)
        if result["recall"] is None or result["precision"] is None:
            raise fail("the set holds no secret or nothing was found", 2)
