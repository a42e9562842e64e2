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

from memlane.config import DedupSettings
from memlane.dedup.guard import GuardVerdict, compare, compound_variant
from memlane.llm import LLM
from memlane.types import Decision, Memory

_HARD_FAILURES = frozenset(
    {GuardVerdict.REORDERED, GuardVerdict.NUMBERS_DIFFER, GuardVerdict.NEGATION_DIFFERS}
)
#: The reasoning logged for a :func:`memlane.dedup.guard.compound_variant` rejection.
_COMPOUND_REASON = "the same text up to how a compound is written (start up = startup)"


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with one offered text.

    ``keep_existing``: confirm ``match`` and store nothing new; ``replace_text``: the text the
    matched memory takes (same id, old text to history); otherwise insert a new memory, linked to
    ``match`` when ``link`` is set.
    """

    decision: Decision
    match: Memory | None
    similarity: float | None
    reasoning: str | None = None
    replace_text: str | None = None
    link: bool = False

    @property
    def keep_existing(self) -> bool:
        return self.decision in {
            Decision.AUTO_REJECT,
            Decision.LLM_REJECT,
            Decision.FALLBACK_REJECT,
        }


def decide(
    new_text: str,
    match: Memory | None,
    similarity: float | None,
    settings: DedupSettings,
    llm: LLM | None = None,
) -> Plan:
    """Decide for ``new_text`` given its nearest memory ``match`` at cosine ``similarity``.

    The content-hash check comes before this (the engine does it); a compound variant of
    ``match`` is ``auto_reject`` at any ``similarity``. Pure apart from the optional
    ``llm`` call, made only where the rules of the module's table do not decide (at or above
    ``gray_low``, the guard not failed hard, and not ``same`` at or above ``auto_reject``).
    """
    if match is None or similarity is None:
        return Plan(Decision.ADDED, match, similarity)
    if compound_variant(match.content, new_text):
        return Plan(Decision.AUTO_REJECT, match, similarity, _COMPOUND_REASON)
    if similarity < settings.gray_low:
        return Plan(Decision.ADDED, match, similarity)
    guard = compare(match.content, new_text)
    verdict = guard.verdict
    if verdict in _HARD_FAILURES:
        return Plan(Decision.GUARD_KEEP, match, similarity, guard.reason, link=True)
    if verdict is GuardVerdict.SAME and similarity >= settings.auto_reject:
        return Plan(Decision.AUTO_REJECT, match, similarity, guard.reason)
    if llm is not None:
        near_identical = verdict in (GuardVerdict.SAME, GuardVerdict.NARROWS)
        return _ask_llm(
            llm, new_text, match, similarity, near_identical and similarity >= settings.replace
        )
    if similarity < settings.replace:
        return Plan(Decision.GRAY_KEEP, match, similarity, guard.reason, link=True)
    if verdict is GuardVerdict.NARROWS:
        return Plan(Decision.AUTO_REJECT, match, similarity, guard.reason)
    if verdict in (GuardVerdict.SAME, GuardVerdict.EXTENDS):
        return Plan(Decision.REPLACED, match, similarity, guard.reason, replace_text=new_text)
    return Plan(Decision.GUARD_KEEP, match, similarity, guard.reason, link=True)


def _ask_llm(llm: LLM, new_text: str, match: Memory, similarity: float, may_reject: bool) -> Plan:
    try:
        verdict = llm.verify_duplicate(match.content, new_text)
    except Exception as exc:  # any provider failure or timeout: fall back, never lose the text
        if may_reject:
            return Plan(Decision.FALLBACK_REJECT, match, similarity, f"LLM failed ({exc})")
        return Plan(Decision.FALLBACK_KEEP, match, similarity, f"LLM failed ({exc})", link=True)
    if verdict.action == "merge" and verdict.merged_text and verdict.merged_text.strip():
        return Plan(
            Decision.LLM_MERGE,
            match,
            similarity,
            verdict.reasoning,
            replace_text=verdict.merged_text.strip(),
        )
    if verdict.action == "reject":
        return Plan(Decision.LLM_REJECT, match, similarity, verdict.reasoning)
    return Plan(Decision.LLM_KEEP, match, similarity, verdict.reasoning, link=True)
