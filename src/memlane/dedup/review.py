"""Review of the dedup log (ARCHITECTURE.md, "Batch dedup"; docs/dedup.md, "Review").

Every decision at or above ``gray_low`` is a ``dedup_log`` row, ``unreviewed`` until someone
looks at it:

- ``hash_exact`` rows are confirmed automatically (the texts are the same memory by
  construction): the write path writes them confirmed, and :meth:`Reviewer.pending` confirms any
  older one still unreviewed before listing the rest;
- **confirm** marks a row ``confirmed``: the decision stands;
- **reverse** undoes a decision that kept the offered text out of the store (a rejection, a
  replacement, a merge, a janitor merge): the offered text is restored as a memory of its own (in
  the scope and type of the memory it was matched with, linked to it by ``related_to``) and the
  row becomes ``reversed``. When a live memory of that scope already has the same content hash, it
  is reported and nothing is written (the row stays as it was). A decision that stored the text as
  its own memory (``added``, ``*_keep``) has nothing to restore: that is an error naming
  ``forget``;
- **review with the LLM** (:meth:`Reviewer.ask_llm`) asks the configured model about the
  rejections that embeddings and the guard made alone (``auto_reject``, ``replaced``,
  ``fallback_reject``, a ``janitor_merge`` by the guard rule): the model's ``reject`` or
  ``merge`` confirms the row, its ``keep`` or ``contradict`` reverses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from memlane.dedup.write import MemoryInput, WritePath
from memlane.errors import ConfigError, InvalidArgument, NotFound
from memlane.store.base import MemoryStore
from memlane.types import Decision, DedupLogEntry, Memory, MemoryType, Relation, ReviewStatus

__all__ = ["EMBEDDING_DECISIONS", "ReviewOutcome", "Reviewer"]

#: Rejections decided without a model: what ``review --llm`` asks the model about.
EMBEDDING_DECISIONS = frozenset(
    {Decision.AUTO_REJECT, Decision.REPLACED, Decision.FALLBACK_REJECT, Decision.JANITOR_MERGE}
)


@dataclass(frozen=True, slots=True)
class ReviewOutcome:
    """What one review did: ``action`` ``confirmed``, ``reversed`` (``restored`` is the memory
    written back) or ``conflict`` (a live memory, ``conflict_id``, already holds the text:
    nothing written); ``entry``: the row as it now stands."""

    action: Literal["confirmed", "reversed", "conflict"]
    entry: DedupLogEntry
    message: str
    restored: Memory | None = None
    conflict_id: str | None = None
    reasoning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "entry": self.entry.to_dict(),
            "message": self.message,
            "restored": self.restored.to_dict() if self.restored else None,
            "conflict_id": self.conflict_id,
            "reasoning": self.reasoning,
        }


class Reviewer:
    """Confirm or reverse ``dedup_log`` rows of one store (see the module doc)."""

    def __init__(self, store: MemoryStore, writer: WritePath, llm: Any = None) -> None:
        self.store = store
        self.writer = writer
        self.llm = llm

    def _entry(self, owner: str, entry_id: int) -> DedupLogEntry:
        entry = self.store.dedup_entry(owner, entry_id)
        if entry is None:
            raise NotFound(
                f"no dedup-log entry {entry_id} for owner {owner!r} "
                "(see `memlane review` for the unreviewed ones)"
            )
        return entry

    def pending(self, owner: str, limit: int = 100) -> list[DedupLogEntry]:
        """Unreviewed rows, oldest first (``hash_exact`` ones confirmed on the way)."""
        while True:
            rows = self.store.pending_review(owner, limit=limit)
            exact = [r for r in rows if r.decision is Decision.HASH_EXACT]
            if not exact:
                return rows
            with self.store.transaction():
                for r in exact:
                    self.store.set_review_status(owner, r.id, ReviewStatus.CONFIRMED)

    def confirm(self, owner: str, entry_id: int) -> ReviewOutcome:
        """The decision stands. Raises :class:`NotFound`."""
        self._entry(owner, entry_id)
        with self.store.transaction():
            entry = self.store.set_review_status(owner, entry_id, ReviewStatus.CONFIRMED)
        return ReviewOutcome("confirmed", entry, f"entry {entry_id} confirmed")

    def reverse(self, owner: str, entry_id: int, reasoning: str | None = None) -> ReviewOutcome:
        """Restore the offered text of row ``entry_id`` as a memory (see the module doc).

        Raises:
            NotFound: no such row for ``owner``.
            InvalidArgument: the row was reversed already, or its decision stored the text.
        """
        entry = self._entry(owner, entry_id)
        if entry.review_status is ReviewStatus.REVERSED:
            raise InvalidArgument(f"dedup-log entry {entry_id} was reversed already")
        if not entry.decision.duplicate:
            raise InvalidArgument(
                f"dedup-log entry {entry_id} ({entry.decision.value}) stored the offered text as "
                "a memory of its own: nothing to restore (to undo it, `memlane forget` that "
                "memory, or confirm the entry)"
            )
        matched = self.store.get(owner, entry.existing_id) if entry.existing_id else None
        agent = matched.agent if matched else None
        mtype = matched.type if matched else MemoryType.FACT
        draft = self.writer.validate(
            MemoryInput(
                entry.new_text,
                mtype,
                owner,
                agent,
                source="review",
                metadata={"restored_from_dedup_log": entry.id},
            )
        )
        live = self.store.find_by_hash(owner, agent, draft.content_hash)
        if live is not None:
            return ReviewOutcome(
                "conflict",
                entry,
                f"a live memory ({live.id}) already holds this text: nothing written",
                conflict_id=live.id,
                reasoning=reasoning,
            )
        vector = self.writer.embeddings.embed([draft.content])[0]
        with self.store.transaction():
            if (twin := self.store.find_by_hash(owner, agent, draft.content_hash)) is not None:
                return ReviewOutcome(  # written by another process meanwhile
                    "conflict",
                    entry,
                    f"a live memory ({twin.id}) already holds this text: nothing written",
                    conflict_id=twin.id,
                    reasoning=reasoning,
                )
            restored = self.store.insert(draft, vector)
            if matched is not None:
                weight = min(max(float(entry.similarity or 0.0), 0.0), 1.0)
                self.store.add_association(
                    owner, restored.id, matched.id, Relation.RELATED_TO, weight
                )
            entry = self.store.set_review_status(owner, entry_id, ReviewStatus.REVERSED)
        return ReviewOutcome(
            "reversed",
            entry,
            f"entry {entry_id} reversed: the text is memory {restored.id} again",
            restored=restored,
            reasoning=reasoning,
        )

    def ask_llm(
        self,
        owner: str,
        limit: int = 100,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[ReviewOutcome]:
        """Ask the model about the unreviewed rejections decided without one
        (:data:`EMBEDDING_DECISIONS`); a failed call leaves its row unreviewed.

        Raises:
            ConfigError: no LLM configured.
        """
        if self.llm is None:
            raise ConfigError(
                "llm.provider",
                "none",
                "review --llm needs an LLM: set [llm] provider (and model) in memlane.toml",
            )
        rows = [r for r in self.pending(owner, limit) if r.decision in EMBEDDING_DECISIONS]
        out: list[ReviewOutcome] = []
        for n, row in enumerate(rows, 1):
            try:
                verdict = self.llm.verify_duplicate(row.existing_text or "", row.new_text)
            except Exception:  # a failed call: the row waits for the next review
                continue
            finally:
                if progress is not None:
                    progress(n, len(rows))
            tag = f"[{verdict.prompt_version}] " if verdict.prompt_version else ""
            why = f"{tag}{verdict.reasoning or ''}".strip()
            if verdict.action in ("reject", "merge"):
                outcome = self.confirm(owner, row.id)
                out.append(
                    ReviewOutcome("confirmed", outcome.entry, outcome.message, None, None, why)
                )
            else:
                out.append(self.reverse(owner, row.id, why))
        return out
