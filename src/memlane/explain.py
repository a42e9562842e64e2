"""Write decisions and injection skip reasons in words, for people: the web pages, the CLI
and ``make demo`` say the same thing (docs/dedup.md and docs/injection.md tell the whole story of
each)."""

from __future__ import annotations

from memlane.types import Decision

__all__ = ["DECISION_WORDS", "SKIP_WORDS"]

#: Each write decision in words (docs/dedup.md has the full story of each).
DECISION_WORDS: dict[str, str] = {
    Decision.ADDED.value: "stored as a new memory",
    Decision.HASH_EXACT.value: "not stored: the same text (case, spacing, punctuation aside)",
    Decision.AUTO_REJECT.value: "not stored: nearly identical to a stored memory (at or above auto_reject)",
    Decision.REPLACED.value: "the new wording replaced the stored one (the old text kept in its history)",
    Decision.GRAY_KEEP.value: "stored apart: similar, but not close enough to merge",
    Decision.GUARD_KEEP.value: "stored apart: the near-identical guard saw a different fact",
    Decision.LLM_MERGE.value: "merged into the memory by the LLM",
    Decision.LLM_REJECT.value: "not stored: the LLM judged it the same fact",
    Decision.LLM_KEEP.value: "stored apart: the LLM judged a different fact",
    Decision.FALLBACK_REJECT.value: "not stored: the LLM failed, the similarity decided",
    Decision.FALLBACK_KEEP.value: "stored apart: the LLM failed, kept to be safe",
    Decision.JANITOR_MERGE.value: "merged by the janitor (after the fact)",
}

#: Why an injection left a candidate out, in words (the ``skipped`` keys of an injection).
SKIP_WORDS: dict[str, str] = {
    "already_injected": "shown within the last turns (re-injection delay)",
    "same_session": "learned in this session: the model has it in the chat",
    "semantic_duplicate": "too close to a memory shown or chosen already",
    "superseded": "a newer version was shown or learned",
    "duplicate_in_batch": "the same as another item of this block",
    "budget": "over the block's token or item budget",
    "weak_match": "weak evidence: one search leg found it, and weakly (the cut)",
    "trivial": "the message needs no memory (greeting, thanks, ok)",
    "disabled": "contextual injection is off for this agent",
    "ambient_off": "ambient (pinned) injection is off",
}
