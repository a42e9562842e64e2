"""Timing shared by the benchmarks and the replay: percentiles, latency summaries, an embedder
wrapper that adds up its seconds, and a loop that times calls one by one."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

T = TypeVar("T")
R = TypeVar("R")


class TimedEmbedder:
    """Wraps an embedder and adds up the seconds spent in it (for the embed share)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.floating]:
        started = time.perf_counter()
        try:
            return self.inner.embed_batch(texts)  # type: ignore[no-any-return]
        finally:
            self.seconds += time.perf_counter() - started

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.floating]:
        """The inner embedder's query embedding (its ``embed_queries`` when it has one)."""
        started = time.perf_counter()
        try:
            embed = getattr(self.inner, "embed_queries", self.inner.embed_batch)
            return embed(texts)  # type: ignore[no-any-return]
        finally:
            self.seconds += time.perf_counter() - started


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation), 0.0 for no values."""
    if not values:
        return 0.0
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def latency_summary(ms: Sequence[float], prefix: str = "") -> dict[str, float]:
    """``{prefix}p50_ms``, ``p95_ms``, ``mean_ms``, ``max_ms`` of ``ms`` (milliseconds, rounded
    to 3 decimals; 0.0 for no values): the latency keys of every bench report."""
    return {
        f"{prefix}p50_ms": round(percentile(ms, 50), 3),
        f"{prefix}p95_ms": round(percentile(ms, 95), 3),
        f"{prefix}mean_ms": round(float(np.mean(ms)) if ms else 0.0, 3),
        f"{prefix}max_ms": round(max(ms) if ms else 0.0, 3),
    }


@dataclass(slots=True)
class Timed(Generic[R]):
    """Calls timed one by one: the milliseconds and the result of each, the seconds the untimed
    warm-up took, and the milliseconds spent embedding during the timed calls."""

    ms: list[float]
    results: list[R]
    warmup_seconds: float
    embed_ms: float

    @property
    def embed_share(self) -> float:
        total = sum(self.ms)
        return round(self.embed_ms / total, 4) if total else 0.0


def time_calls(
    timer: TimedEmbedder, warmup: Sequence[T], timed: Sequence[T], call: Callable[[T], R]
) -> Timed[R]:
    """``call`` on each of ``warmup`` with no clock, then on each of ``timed``, one clock each."""
    started = time.perf_counter()
    for item in warmup:
        call(item)
    warmup_seconds = time.perf_counter() - started
    ms: list[float] = []
    results: list[R] = []
    embed_before = timer.seconds
    for item in timed:
        started = time.perf_counter()
        result = call(item)
        ms.append((time.perf_counter() - started) * 1000.0)
        results.append(result)
    return Timed(ms, results, warmup_seconds, (timer.seconds - embed_before) * 1000.0)
