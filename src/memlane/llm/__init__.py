"""The LLM seam of the write path: gray-zone duplicate verification.

No provider ships yet; without one, gray-zone pairs are kept (``gray_keep``) and linked. A provider
implements :class:`LLM`; the engine calls it only on the write path, never while injecting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ["LLM", "LLMVerdict"]


@dataclass(frozen=True, slots=True)
class LLMVerdict:
    """``merge``: both say the same, ``merged_text`` replaces the existing text; ``reject``: the new
    text adds nothing; ``keep``: they differ, store both."""

    action: Literal["merge", "reject", "keep"]
    merged_text: str | None = None
    reasoning: str | None = None


@runtime_checkable
class LLM(Protocol):
    """A model that decides whether two memories say the same thing.

    Raise any exception (or :class:`~memlane.errors.LLMError`) on failure or timeout: the write
    path then falls back (``fallback_reject`` only for near-identical text, else ``fallback_keep``).
    """

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict: ...
