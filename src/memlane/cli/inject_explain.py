"""``memlane inject --explain``: every candidate of the turn, its legs' ranks and scores, and the
rule that kept it in the block or cut it, in words (:mod:`memlane.injection.cut`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from memlane.cli.render import counts_text, table
from memlane.injection.cut import Verdict
from memlane.types import Injection

LEG_LETTER = {"vector": "v", "fts": "f", "neighbour": "n", "graph": "g"}


def outcome(verdict: Verdict, injection: Injection) -> str:
    """``in block``, ``cut`` or ``left out after the cut`` (the session's window, a duplicate,
    the budget: the turn's ``skipped`` counts say which)."""
    if not verdict.kept:
        return "cut"
    shown = {item.memory.id for item in injection.items}
    if verdict.memory.id in shown:
        return "in block"
    return "left out after the cut"


def explain_rows(verdicts: Sequence[Verdict], injection: Injection) -> list[dict[str, Any]]:
    """The verdicts as JSON-ready dicts (``--json --explain``): id, content, ranks, cosine,
    bm25, kept (by the cut), outcome, rule."""
    return [
        {
            "id": v.memory.id,
            "content": v.memory.content,
            "ranks": dict(v.ranks),
            "cosine": round(v.cosine, 4),
            "bm25": None if v.bm25 is None else round(v.bm25, 3),
            "kept": v.kept,
            "outcome": outcome(v, injection),
            "rule": v.rule,
        }
        for v in verdicts
    ]


def explain_table(verdicts: Sequence[Verdict], injection: Injection) -> Table:
    """A table of the candidates, search order: legs (v = vector, f = full-text, n = neighbour,
    g = graph, with the rank), cosine, BM25, outcome, the memory and, under it, the rule."""
    kept = sum(v.kept for v in verdicts)
    t = table(
        f"{len(verdicts)} candidates: {kept} passed the cut, {len(injection.items)} in the block"
        + (f" (left out: {counts_text(injection.skipped)})" if injection.skipped else "")
    )
    t.add_column("legs", no_wrap=True)
    t.add_column("cos", justify="right", no_wrap=True)
    t.add_column("bm25", justify="right", no_wrap=True)
    t.add_column("outcome", no_wrap=True)
    t.add_column("memory, and why", min_width=40)
    for v in verdicts:
        legs = " ".join(f"{LEG_LETTER.get(leg, leg[0])}{rank}" for leg, rank in v.ranks.items())
        state = outcome(v, injection)
        cell = Text(v.memory.content)
        cell.append(f"\n{v.rule}", style="dim")
        t.add_row(
            legs,
            f"{v.cosine:.3f}",
            "-" if v.bm25 is None else f"{v.bm25:.2f}",
            Text(state, style="green" if state == "in block" else "yellow"),
            cell,
        )
    return t
