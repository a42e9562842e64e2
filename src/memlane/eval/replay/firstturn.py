"""Injection precision and recall, each question asked as the first turn of a fresh session.

Retrieval recall (the questions searched with ``limit=10``) says whether the evidence can be
found; it does not say what the model is shown. Here every question is injected as the first
turn of a session of its own (nothing was shown before, nothing is held back by the window), by
the real :class:`~memlane.injection.Injector` over the replay's store, once with the hybrid
search and once with each leg alone (an injector whose retriever runs that mode), and the block
is scored (docs/replay.md, "Injection precision"):

- ``items`` and ``chars``: memories in the block and the block's length (0 when no block);
- ``precision``: items citing some of the question's evidence / items, over all blocks
  (``precision_per_block``: the same averaged over the blocks with items);
- ``recall``: the question's evidence ids covered by the items' evidence / its evidence ids.

The sessions are named ``first-turn:<mode>:<run>:<n>`` (``run``: a time stamp, so a store scored
twice never finds a question's session already used).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane.engine import MemoryEngine
from memlane.injection import Injector

#: The injection modes scored: the system, then each leg alone.
FIRST_TURN_MODES = ("hybrid", "vector", "fts")


@dataclass(slots=True)
class FirstTurn:
    """One question's block: memories, characters, those citing its evidence, recall."""

    items: int
    chars: int
    citing: int
    recall: float
    #: The block's ``skipped`` counts (candidates left out, by reason).
    skipped: dict[str, int] = field(default_factory=dict)


def first_turn_injectors(engine: MemoryEngine) -> dict[str, Injector]:
    """Mode -> an injector over ``engine``'s store and settings whose search runs that mode."""
    return {mode: engine.injector_in_mode(mode) for mode in FIRST_TURN_MODES}


def score_first_turns(
    engine: MemoryEngine,
    owner: str,
    questions: Sequence[Any],
    evidence_of: Callable[[object], list[str]],
    into: dict[str, list[FirstTurn]],
) -> None:
    """Inject each of ``questions`` (``.text``, ``.evidence``) as the first turn of a fresh
    session of ``owner``, in each mode of :data:`FIRST_TURN_MODES`, and append each block's
    :class:`FirstTurn` to ``into[mode]``. ``evidence_of``: the ids a memory's
    ``metadata["evidence"]`` cites."""
    run = time.strftime("%Y%m%dT%H%M%S")
    injectors = first_turn_injectors(engine)
    for n, question in enumerate(questions):
        wanted = set(question.evidence)
        if not wanted:
            continue
        for mode, injector in injectors.items():
            injection = injector.inject(f"first-turn:{mode}:{run}:{n}", question.text, owner=owner)
            covered: set[str] = set()
            citing = 0
            for item in injection.items:
                cited = wanted.intersection(evidence_of(item.memory.metadata.get("evidence")))
                citing += bool(cited)
                covered |= cited
            into.setdefault(mode, []).append(
                FirstTurn(
                    len(injection.items),
                    len(injection.block or ""),
                    citing,
                    len(covered) / len(wanted),
                    dict(injection.skipped),
                )
            )


def first_turn_report(results: dict[str, list[FirstTurn]]) -> dict[str, Any]:
    """Mode -> ``questions``, ``items_mean``, ``items_median``, ``chars_mean``, ``empty_blocks``,
    ``precision`` (citing items / items), ``precision_per_block`` (averaged over blocks with
    items), ``recall`` (mean over the questions), ``skipped_per_block`` (candidates left out
    per block, by reason)."""
    out: dict[str, Any] = {}
    for mode, rows in results.items():
        if not rows:
            continue
        items = sorted(r.items for r in rows)
        skipped: Counter[str] = Counter()
        for r in rows:
            skipped.update(r.skipped)
        with_items = [r for r in rows if r.items]
        out[mode] = {
            "questions": len(rows),
            "items_mean": round(sum(items) / len(rows), 3),
            "items_median": items[len(items) // 2],
            "chars_mean": round(sum(r.chars for r in rows) / len(rows), 1),
            "empty_blocks": len(rows) - len(with_items),
            "precision": round(sum(r.citing for r in rows) / max(1, sum(items)), 4),
            "precision_per_block": round(
                sum(r.citing / r.items for r in with_items) / max(1, len(with_items)), 4
            ),
            "recall": round(sum(r.recall for r in rows) / len(rows), 4),
            "skipped_per_block": {k: round(v / len(rows), 3) for k, v in skipped.most_common()},
        }
    return out
