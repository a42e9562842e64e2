"""The write path's decision for one offered memory (ARCHITECTURE.md, "Write path").

Order of checks, each against the offered memory's scope ``(owner, agent)`` only:

1. content hash hit -> ``hash_exact`` (keep, confirm);
2. the nearest memory is the same text up to how a compound is written ("start up" / "startup",
   :func:`memlane.dedup.guard.compound_variant`) -> ``auto_reject`` at any cosine: the duplicate
   class of the hash, which a hash cannot see without a dictionary;
3. nearest memory by cosine ``s`` and the near-identical guard verdict ``g``
   (:func:`memlane.dedup.guard.compare`):

   ============================================  =======================================
   condition                                     decision
   ============================================  =======================================
   ``s < gray_low``                              ``added``
   ``g`` reordered / numbers / negation          ``guard_keep`` (new memory + related_to)
   ``s >= auto_reject`` and ``g == same``        ``auto_reject`` (keep, confirm)
   with an LLM, any other ``s``                  ``llm_merge`` / ``llm_reject`` / ``llm_keep``
                                                 (a contradiction: ``llm_keep``, the old
                                                 memory ``superseded``)
   ... the LLM failed                            ``fallback_reject`` when ``s >= replace`` and
                                                 ``g`` is same/narrows, else ``fallback_keep``
   no LLM, ``s >= replace``, ``g == narrows``    ``auto_reject`` (the existing text says more)
   no LLM, ``s >= replace``, ``g`` same/extends  ``replaced`` (newer wording, old in history)
   no LLM, ``s >= replace`` otherwise            ``guard_keep``
   no LLM, gray zone                             ``gray_keep`` (new memory + related_to)
   ============================================  =======================================

Why the guard decides and not the cosine: with all-MiniLM-L6-v2 a role swap ("Quaid gave Melina a
ring" / "Melina gave Quaid a ring") scores a median cosine of 0.994 on PAWS, so no threshold can
separate it from a paraphrase (figures in docs/dedup.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memlane.config import DedupSettings
from memlane.dedup.guard import GuardVerdict, compare, compound_variant
from memlane.history import is_injection_text
from memlane.llm import LLM
from memlane.types import Decision, Memory

_HARD_FAILURES = frozenset(
    {GuardVerdict.REORDERED, GuardVerdict.NUMBERS_DIFFER, GuardVerdict.NEGATION_DIFFERS}
)
#: The reasoning logged for a :func:`memlane.dedup.guard.compound_variant` rejection.
_COMPOUND_REASON = "the same text up to how a compound is written (start up = startup)"


@dataclass(frozen=True, slots=True)
class Add:
    """Store the text as a new memory: nothing in scope is within ``gray_low``.
    ``nearest``/``similarity``: the closest memory, when there is one (not linked, not logged)."""

    nearest: Memory | None = None
    similarity: float | None = None
    decision: Literal[Decision.ADDED] = Decision.ADDED


@dataclass(frozen=True, slots=True)
class Keep:
    """Keep ``match`` (confirm it) and store nothing new: the offered text adds nothing."""

    decision: Literal[
        Decision.HASH_EXACT, Decision.AUTO_REJECT, Decision.LLM_REJECT, Decision.FALLBACK_REJECT
    ]
    match: Memory
    similarity: float
    reasoning: str


@dataclass(frozen=True, slots=True)
class Rewrite:
    """``match`` takes ``text`` (same id; its old text goes to history) and is confirmed."""

    decision: Literal[Decision.REPLACED, Decision.LLM_MERGE]
    match: Memory
    similarity: float
    reasoning: str
    text: str


@dataclass(frozen=True, slots=True)
class KeepApart:
    """Store the text as a new memory linked to ``match`` (``related_to``, weight = cosine):
    similar, but not shown to be the same."""

    decision: Literal[
        Decision.GRAY_KEEP, Decision.GUARD_KEEP, Decision.LLM_KEEP, Decision.FALLBACK_KEEP
    ]
    match: Memory
    similarity: float
    reasoning: str
    #: The LLM judged that the new text contradicts ``match``: ``match`` is expired
    #: (``superseded``, ``valid_to`` set) and the new memory ``updates`` it.
    supersedes: bool = False


#: The write path's plan for one offered text: one case per kind of outcome, each carrying only
#: the fields that outcome needs (and the decisions it can carry, as a ``Literal``).
Plan = Add | Keep | Rewrite | KeepApart


def decide(
    new_text: str,
    match: Memory | None,
    similarity: float | None,
    settings: DedupSettings,
    llm: LLM | None = None,
) -> Plan:
    """Decide for ``new_text`` given its nearest memory ``match`` at cosine ``similarity``.

    The content-hash check comes before this (the write path does it); a compound variant of
    ``match`` is ``auto_reject`` at any ``similarity``. Pure apart from the optional ``llm``
    call, made only where the rules of the module's table do not decide (at or above
    ``gray_low``, the guard not failed hard, and not ``same`` at or above ``auto_reject``).
    Calibration (:mod:`memlane.eval`) calls this same function.
    """
    if match is None or similarity is None:
        return Add(match, similarity)
    if compound_variant(match.content, new_text):
        return Keep(Decision.AUTO_REJECT, match, similarity, _COMPOUND_REASON)
    if similarity < settings.gray_low:
        return Add(match, similarity)
    guard = compare(match.content, new_text)
    verdict = guard.verdict
    reason = guard.reason
    if verdict in _HARD_FAILURES:
        return KeepApart(Decision.GUARD_KEEP, match, similarity, reason)
    if verdict is GuardVerdict.SAME and similarity >= settings.auto_reject:
        return Keep(Decision.AUTO_REJECT, match, similarity, reason)
    if llm is not None:
        near_identical = verdict in (GuardVerdict.SAME, GuardVerdict.NARROWS)
        return _ask_llm(
            llm, new_text, match, similarity, near_identical and similarity >= settings.replace
        )
    if similarity < settings.replace:
        return KeepApart(Decision.GRAY_KEEP, match, similarity, reason)
    if verdict is GuardVerdict.NARROWS:
        return Keep(Decision.AUTO_REJECT, match, similarity, reason)
    if verdict in (GuardVerdict.SAME, GuardVerdict.EXTENDS):
        return Rewrite(Decision.REPLACED, match, similarity, reason, new_text)
    return KeepApart(Decision.GUARD_KEEP, match, similarity, reason)


def _ask_llm(llm: LLM, new_text: str, match: Memory, similarity: float, may_reject: bool) -> Plan:
    def fallback(why: str) -> Plan:
        if may_reject:
            return Keep(Decision.FALLBACK_REJECT, match, similarity, why)
        return KeepApart(Decision.FALLBACK_KEEP, match, similarity, why)

    try:
        verdict = llm.verify_duplicate(match.content, new_text)
    except Exception as exc:  # any provider failure or timeout: fall back, never lose the text
        return fallback(f"LLM failed ({exc})")
    reasoning = verdict.reasoning or ""
    if verdict.prompt_version:
        reasoning = f"[{verdict.prompt_version}] {reasoning}".rstrip()
    if verdict.action == "merge":
        merged = (verdict.merged_text or "").strip()
        problem = _merge_problem(merged, match.content, new_text)
        if problem:
            return fallback(f"LLM merge refused: {problem} ({reasoning})")
        return Rewrite(Decision.LLM_MERGE, match, similarity, reasoning, merged)
    if verdict.action == "reject":
        return Keep(Decision.LLM_REJECT, match, similarity, reasoning)
    if verdict.action == "contradict":
        why = f"contradicts the existing memory, which is superseded: {reasoning}"
        return KeepApart(Decision.LLM_KEEP, match, similarity, why, supersedes=True)
    return KeepApart(Decision.LLM_KEEP, match, similarity, reasoning)


def _merge_problem(merged: str, existing: str, new: str) -> str | None:
    """Why an LLM's merged text may not replace ``existing`` (``None``: it may)."""
    if not merged:
        return "the merged text is empty"
    if is_injection_text(merged):
        return "the merged text is an injected context block"
    if len(merged) > len(existing) + len(new) + 1:
        return f"the merged text ({len(merged)} chars) is longer than both inputs together"
    return None
