"""``memlane llm bench``: what the configured model does on the write path, measured.

Two parts, both through the configured provider (``[llm]``) and the configured embedder:

- **Gray-zone pairs**: labelled PAWS (``label`` 1 = same meaning) and STS-B (``score >= 4``)
  pairs of the evaluation data whose cosine lies in the gray zone ``[gray_low, auto_reject)``
  *and* that the write path would send to the model (:func:`memlane.dedup.pipeline.decide`
  asks it: the guard did not refuse them). ``pairs`` of them are drawn (half from each file,
  seeded). Each is decided twice by that same function: with the model, and without one (the
  rule a store without an LLM applies). Reported: the share of model calls answered and
  parsed, how many decisions the model took (``llm_*``) or fell back (``fallback_*``),
  precision and recall of "duplicate" against the labels with and without the model, and the
  latency per call (p50, p95).
- **Learn on one LoCoMo session**: the session's dialogue through :meth:`MemoryEngine.learn`
  (one call) in a throwaway store: memories learned, tokens, and how many are *supported*
  by the session — a learned memory is supported when its cosine to one of LoCoMo's own
  per-session observations (facts people wrote from the dialogue) is at least
  :data:`SUPPORTED_COSINE`: a stand-in for a reader's judgement, printed beside each memory so a
  reader can check it.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlane.config import Settings
from memlane.dedup.pipeline import decide
from memlane.embeddings import embedder_from_settings
from memlane.errors import ConfigError
from memlane.eval.calibrate import Pair, _stored, cosines, load_pairs, scores
from memlane.llm import LLM, LLMVerdict, make_llm
from memlane.types import Decision

if TYPE_CHECKING:
    from memlane.engine import MemoryEngine

#: The files the pairs come from, relative to the data folder (``../shared/data``).
PAIR_FILES = ("paws/paws_dev.tsv", "stsb/stsb_dev.tsv")
LOCOMO_FILE = "locomo/locomo_dev.json"
#: A learned memory is "supported" from this cosine to one of the session's observations
#: (all-MiniLM-L6-v2 scale: paraphrases of one fact score about 0.7 and above; docs/dedup.md).
SUPPORTED_COSINE = 0.6
#: Decisions that store nothing new: the offered text was judged a duplicate.
DUPLICATE = {
    Decision.AUTO_REJECT,
    Decision.REPLACED,
    Decision.LLM_REJECT,
    Decision.LLM_MERGE,
    Decision.FALLBACK_REJECT,
}


class _Asked:
    """An :class:`LLM` that only notes that it was asked (to find the pairs the model gets)."""

    asked = False

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict:
        self.asked = True
        raise RuntimeError("probe")


class _Timed:
    """The model, each call's latency and outcome noted."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict:
        start = time.perf_counter()
        try:
            return self.llm.verify_duplicate(existing, new)
        except Exception as exc:
            self.errors.append(str(exc))
            raise
        finally:
            self.latencies.append(time.perf_counter() - start)


def _asks_model(pair: Pair, cos: float, settings: Settings) -> bool:
    probe = _Asked()
    decide(pair.new, _stored(pair.existing), cos, settings.dedup, probe)
    return probe.asked


def gray_pairs(
    data: Path, settings: Settings, count: int, seed: int = 27
) -> list[tuple[str, Pair, float]]:
    """``count`` gray-zone pairs the write path would send to the model, half from each file of
    :data:`PAIR_FILES` (fewer when a file has fewer), as ``(file, pair, cosine)``.

    Raises:
        InvalidArgument: a file is missing or lacks a column.
    """
    embedder = embedder_from_settings(settings.embedding)
    low, high = settings.dedup.gray_low, settings.dedup.auto_reject
    chosen: list[tuple[str, Pair, float]] = []
    for n, name in enumerate(PAIR_FILES):
        pairs = load_pairs(data / name)
        cos = cosines(embedder, pairs)
        gray = [
            (name, p, c)
            for p, c in zip(pairs, cos, strict=True)
            if low <= c < high and _asks_model(p, c, settings)
        ]
        want = count // len(PAIR_FILES) + (count % len(PAIR_FILES) if n == 0 else 0)
        chosen += random.Random(seed).sample(gray, min(want, len(gray)))
    return chosen


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 3)


def bench_pairs(
    data: Path,
    settings: Settings,
    count: int = 200,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The gray-zone part (see the module's docstring). Returns its figures as a dict.

    Raises:
        ConfigError: no ``[llm] provider``.
        InvalidArgument: the data files are missing.
    """
    llm = make_llm(settings.llm)
    if llm is None:
        raise ConfigError("llm.provider", "none", "llm bench needs [llm] provider and model")
    chosen = gray_pairs(data, settings, count)
    timed = _Timed(llm)
    with_model: list[Decision] = []
    without: list[Decision] = []
    for i, (_, pair, cos) in enumerate(chosen, 1):
        with_model.append(
            decide(pair.new, _stored(pair.existing), cos, settings.dedup, timed).decision
        )
        without.append(decide(pair.new, _stored(pair.existing), cos, settings.dedup).decision)
        if progress is not None:
            progress(i, len(chosen))
    labels = [p for _, p, _ in chosen]
    calls = len(timed.latencies)
    answered = calls - len(timed.errors)
    stats = getattr(llm, "stats", None)
    counts = stats.as_dict() if stats is not None else {}
    return {
        "pairs": len(chosen),
        "from": dict(Counter(name for name, _, _ in chosen)),
        "duplicates": sum(p.duplicate for p in labels),
        "calls": calls,
        "answered_and_parsed": answered,
        "answered_share": round(answered / calls, 4) if calls else None,
        "errors": dict(Counter(_error_kind(e) for e in timed.errors).most_common()),
        "decisions_with_model": dict(Counter(d.value for d in with_model).most_common()),
        "decisions_without_model": dict(Counter(d.value for d in without).most_common()),
        "with_model": scores([d in DUPLICATE for d in with_model], labels),
        "without_model": scores([d in DUPLICATE for d in without], labels),
        "latency_p50_s": _percentile(timed.latencies, 0.5),
        "latency_p95_s": _percentile(timed.latencies, 0.95),
        "tokens_in": counts.get("tokens_in", 0),
        "tokens_out": counts.get("tokens_out", 0),
        "form": getattr(llm, "form", None),
    }


def _error_kind(message: str) -> str:
    """A failed call's kind, for the summary: malformed answer, HTTP status, timeout, other."""
    if "malformed" in message:
        return "malformed answer"
    if "answered HTTP" in message:
        return "HTTP " + message.split("answered HTTP ", 1)[1].split(":", 1)[0]
    if "did not answer within" in message:
        return "timeout"
    return "other"


def bench_learn(
    data: Path, settings: Settings, conversation: int = 0, session: int = 1
) -> dict[str, Any]:
    """The learn part: session ``session`` of LoCoMo conversation number ``conversation``.
    Returns the memories learned (each with its best observation and cosine), how many are
    supported, the decisions, tokens and seconds.

    Raises:
        ConfigError: no ``[llm] provider``.
        InvalidArgument: the LoCoMo file is missing or malformed, or has no such session.
    """
    from memlane import MemoryEngine
    from memlane.errors import InvalidArgument, LLMError
    from memlane.eval.replay.locomo import load_locomo

    if settings.llm.provider == "none":
        raise ConfigError("llm.provider", "none", "llm bench needs [llm] provider and model")
    conv = load_locomo(data / LOCOMO_FILE)[conversation]
    turns = dict(conv.sessions).get(session)
    if not turns:
        raise InvalidArgument(f"{conv.sample_id} has no session {session}")
    observations = [o.text for o in conv.observations.get(session, ())]
    messages = [{"role": "user", "content": t.message()} for t in turns]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memlane-llm-bench-") as tmp:
        store = settings.store.model_copy(update={"path": str(Path(tmp) / "learn.db")})
        scratch = settings.model_copy(update={"store": store})
        with MemoryEngine.open(settings=scratch) as engine:
            error = None
            try:
                results = engine.learn(messages, owner=conv.sample_id)
            except LLMError as exc:
                results, error = [], str(exc)
            stats = engine.llm_stats()
            learned = [r.memory.content for r in results]
            support = _support(engine, learned, observations)
    memories: list[dict[str, Any]] = [
        {"content": text, "decision": r.decision.value, "best_observation": obs, "cosine": cos}
        for text, r, (obs, cos) in zip(learned, results, support, strict=True)
    ]
    return {
        "conversation": conv.sample_id,
        "session": session,
        "turns": len(turns),
        "observations": len(observations),
        "learned": len(memories),
        "supported": sum(m["cosine"] >= SUPPORTED_COSINE for m in memories),
        "supported_cosine": SUPPORTED_COSINE,
        "memories": memories,
        "error": error,
        "tokens_in": stats.get("tokens_in", 0),
        "tokens_out": stats.get("tokens_out", 0),
        "seconds": round(time.perf_counter() - start, 2),
    }


def _support(
    engine: MemoryEngine, learned: list[str], observations: list[str]
) -> list[tuple[str, float]]:
    """Each learned text's nearest observation and its cosine (the engine's model)."""
    if not learned or not observations:
        return [("", 0.0) for _ in learned]
    a = engine.embed(learned)
    b = engine.embed(observations)
    sims = a @ b.T
    best = sims.argmax(axis=1)
    return [(observations[j], round(float(sims[i, j]), 4)) for i, j in enumerate(best)]
