"""The LLM of the write path: gray-zone duplicate verification and learning from conversations.

Optional: without one (``[llm] provider = "none"``), gray-zone pairs are kept (``gray_keep``) and
linked, and :meth:`MemoryEngine.learn` says which setting to set. A provider implements
:class:`LLM`; the engine calls it only on the write path, never while injecting. The providers
(:mod:`memlane.llm.providers`) import their SDKs (``openai``, ``anthropic``) only when built, so
``import memlane`` never loads them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from memlane.config import LLMSettings

__all__ = [
    "LLM",
    "BatchVerifier",
    "ExtractedMemory",
    "LLMStats",
    "LLMVerdict",
    "Learner",
    "MergeVerdict",
    "Merger",
    "make_llm",
]


@dataclass(frozen=True, slots=True)
class LLMVerdict:
    """``merge``: both say the same, ``merged_text`` replaces the existing text; ``reject``: the new
    text adds nothing; ``keep``: they differ, store both; ``contradict``: the new text makes the
    existing one no longer true (it is expired, never deleted). ``prompt_version``: the prompt
    that asked (logged with the reasoning in ``dedup_log``)."""

    action: Literal["merge", "reject", "keep", "contradict"]
    merged_text: str | None = None
    reasoning: str | None = None
    prompt_version: str | None = None


@dataclass(frozen=True, slots=True)
class MergeVerdict:
    """The janitor's question about a cluster: ``merge`` the memories numbered ``members``
    (0-based positions in the list asked about) into ``merged_text``, or ``keep`` them all."""

    action: Literal["merge", "keep"]
    members: tuple[int, ...] = ()
    merged_text: str | None = None
    reasoning: str | None = None
    prompt_version: str | None = None


@dataclass(frozen=True, slots=True)
class ExtractedMemory:
    """One memory a model extracted from a conversation."""

    content: str
    type: str
    importance: float


@runtime_checkable
class LLM(Protocol):
    """A model that decides whether two memories say the same thing.

    Raise any exception (or :class:`~memlane.errors.LLMError`) on failure or timeout: the write
    path then falls back (``fallback_reject`` only for near-identical text, else ``fallback_keep``).
    """

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict: ...


@runtime_checkable
class Learner(Protocol):
    """A model that extracts memories from a conversation transcript (one text, roles named)."""

    def extract_memories(self, transcript: str) -> list[ExtractedMemory]: ...


@runtime_checkable
class BatchVerifier(Protocol):
    """A model that verifies several gray-zone pairs in one call (answers in order). Raise any
    exception on failure: the write path then asks pair by pair."""

    def verify_many(self, pairs: list[tuple[str, str]]) -> list[LLMVerdict]: ...


@runtime_checkable
class Merger(Protocol):
    """A model that merges a cluster of similar memories into one (the janitor). Raise any
    exception on failure: the janitor then applies its rule without a model."""

    def merge_memories(self, texts: list[str]) -> MergeVerdict: ...


class LLMStats:
    """Counters of one process's LLM calls (thread-safe): calls, failures, tokens, latency;
    ``refused``: calls the server answered with an HTTP error; ``malformed``: calls answered
    with text that is not the JSON asked for (or JSON that is unusable); ``by_kind``: calls,
    failures and tokens per kind of call (``verify``, ``verify-many``, ``janitor``, ``learn``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0
        self.refused = 0
        self.malformed = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.latency_s = 0.0
        self.by_kind: dict[str, dict[str, int]] = {}

    def record(
        self,
        *,
        ok: bool,
        tokens_in: int,
        tokens_out: int,
        latency_s: float,
        kind: str = "other",
        refused: bool = False,
        malformed: bool = False,
    ) -> None:
        with self._lock:
            self.calls += 1
            self.failures += 0 if ok else 1
            self.refused += int(refused)
            self.malformed += int(malformed)
            self.tokens_in += tokens_in
            self.tokens_out += tokens_out
            self.latency_s += latency_s
            k = self.by_kind.setdefault(
                kind, {"calls": 0, "failures": 0, "tokens_in": 0, "tokens_out": 0}
            )
            k["calls"] += 1
            k["failures"] += 0 if ok else 1
            k["tokens_in"] += tokens_in
            k["tokens_out"] += tokens_out

    def mark_failed(self, kind: str = "other") -> None:
        """The last call answered valid JSON that was still unusable (counted as a failure)."""
        with self._lock:
            self.failures += 1
            self.malformed += 1
            if kind in self.by_kind:
                self.by_kind[kind]["failures"] += 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": self.calls,
                "failures": self.failures,
                "refused": self.refused,
                "malformed": self.malformed,
                "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out,
                "latency_s": round(self.latency_s, 4),
                "by_kind": {k: dict(v) for k, v in self.by_kind.items()},
            }


def make_llm(settings: LLMSettings) -> LLM | None:
    """The provider ``settings`` name, or ``None`` for ``provider = "none"``.

    Raises:
        ConfigError: the API key variable is named but not set (and no ``base_url``).
    """
    if settings.provider == "none":
        return None
    from memlane.llm.providers import AnthropicLLM, OpenAILLM

    if settings.provider == "openai":
        return OpenAILLM(settings)
    return AnthropicLLM(settings)
