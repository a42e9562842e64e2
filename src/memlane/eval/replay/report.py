"""The replay's report: per-conversation tallies (:class:`ConversationStats`) summed into the
JSON-ready dict :func:`memlane.eval.replay.run.replay` returns (every key in ``docs/replay.md``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane.config import Settings
from memlane.eval.replay.firstturn import FirstTurn, first_turn_report
from memlane.eval.replay.locomo import CATEGORIES
from memlane.eval.timing import percentile

#: Search modes run on every question: the system, then the two single-leg baselines.
MODES = ("hybrid", "vector", "fts")


@dataclass(slots=True)
class QuestionResult:
    #: LoCoMo's category number (1-4) or BEAM's category name.
    category: int | str
    recall_5: float
    recall_10: float
    hit_10: bool


@dataclass(slots=True)
class ConversationStats:
    sample_id: str
    sessions: int = 0
    offered: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    stored: int = 0
    turns: int = 0
    items: int = 0
    skipped_turns: int = 0
    skipped_reasons: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    search_latencies: list[float] = field(default_factory=list)
    repeated: int = 0
    max_blocks: int = 0
    tokens: int = 0
    tokens_naive: int = 0
    tokens_naive_searched: int = 0
    #: Milliseconds per memory of each ``add_many`` call (its time / its memories).
    store_ms: list[float] = field(default_factory=list)
    questions: dict[str, list[QuestionResult]] = field(
        default_factory=lambda: {m: [] for m in MODES}
    )
    question_latencies: dict[str, list[float]] = field(
        default_factory=lambda: {m: [] for m in MODES}
    )
    unresolved_questions: int = 0
    seconds: float = 0.0
    #: Mode -> each question's block as the first turn of a fresh session (firstturn.py).
    first_turn: dict[str, list[FirstTurn]] = field(default_factory=dict)


def latency(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "max": round(max(values, default=0.0), 3),
    }


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return round(sum(vals) / len(vals), 4) if vals else 0.0


def _scores(results: Sequence[QuestionResult]) -> dict[str, Any]:
    return {
        "questions": len(results),
        "recall_at_5": _mean(r.recall_5 for r in results),
        "recall_at_10": _mean(r.recall_10 for r in results),
        "hit_at_10": _mean(1.0 if r.hit_10 else 0.0 for r in results),
    }


def _retrieval(stats: Sequence[ConversationStats]) -> dict[str, Any]:
    def block(mode: str) -> dict[str, Any]:
        results = [r for s in stats for r in s.questions.get(mode, [])]
        out = _scores(results)
        present = sorted({r.category for r in results}, key=lambda c: (isinstance(c, str), c))
        out["by_category"] = {
            str(cat): {
                "name": CATEGORIES.get(cat, str(cat)) if isinstance(cat, int) else cat,
                **_scores([r for r in results if r.category == cat]),
            }
            for cat in present
        }
        times = [x for s in stats for x in s.question_latencies.get(mode, [])]
        out["latency_ms"] = latency(times)
        return out

    main = block("hybrid")
    main["unresolved_questions"] = sum(s.unresolved_questions for s in stats)
    names = dict.fromkeys(m for s in stats for m in s.questions)  # the modes, then recipes
    main["baselines"] = {mode: block(mode) for mode in names if mode != "hybrid"}
    return main


def _sections(stats: Sequence[ConversationStats]) -> dict[str, Any]:
    decisions: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    for s in stats:
        decisions.update(s.decisions)
        skipped.update(s.skipped_reasons)
    tokens = sum(s.tokens for s in stats)
    naive = sum(s.tokens_naive for s in stats)
    return {
        "memories": {
            "offered": sum(s.offered for s in stats),
            "stored": sum(s.stored for s in stats),
            "decisions": dict(decisions.most_common()),
            "store_ms_per_memory": latency([x for s in stats for x in s.store_ms]),
        },
        "injection": {
            "turns": sum(s.turns for s in stats),
            "items": sum(s.items for s in stats),
            "skipped_turns": sum(s.skipped_turns for s in stats),
            "skipped": dict(skipped.most_common()),
            "latency_ms": latency([x for s in stats for x in s.latencies]),
            "latency_ms_searched": latency([x for s in stats for x in s.search_latencies]),
            "repeated_within_window": sum(s.repeated for s in stats),
            "max_blocks_in_history": max((s.max_blocks for s in stats), default=0),
            "tokens": tokens,
            "tokens_naive": naive,
            "tokens_naive_searched_turns": sum(s.tokens_naive_searched for s in stats),
            "tokens_ratio": round(tokens / naive, 4) if naive else 0.0,
        },
        "retrieval": _retrieval(stats),
        "injection_first_turn": first_turn_report(
            {m: [r for s in stats for r in s.first_turn.get(m, [])] for m in _modes(stats)}
        ),
    }


def _modes(stats: Sequence[ConversationStats]) -> list[str]:
    return list(dict.fromkeys(m for s in stats for m in s.first_turn))


def build_report(
    stats: Sequence[ConversationStats], settings: Settings, tokenizer: str, backend: str | None
) -> dict[str, Any]:
    cfg = settings.injection_for(None)
    report = _sections(stats)
    report["injection"]["tokenizer"] = tokenizer
    report["injection"]["context_window_depth"] = cfg.context_window_depth
    report["injection"]["max_injected_blocks_in_history"] = cfg.max_injected_blocks_in_history
    report["settings"] = {
        "embedding": {
            "provider": settings.embedding.provider,
            "backend": backend,
            "model": settings.embedding.model
            if settings.embedding.provider == "local"
            else f"hash-{settings.embedding.dimension}",
        },
        "retrieval": settings.retrieval.model_dump(),
        "injection": cfg.model_dump(mode="json"),
    }
    per: list[dict[str, Any]] = []
    for s in stats:
        one = _sections([s])
        per.append(
            {
                "sample_id": s.sample_id,
                "sessions": s.sessions,
                **one,
                "seconds": round(s.seconds, 3),
            }
        )
    report["per_conversation"] = per
    return report
