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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memlane._text import content_hash
from memlane.dedup.write import MemoryInput, WritePath
from memlane.errors import ConfigError, InvalidArgument, NotFound
from memlane.store.base import MemoryStore
from memlane.types import (
    ChangeReason,
    Decision,
    DedupLogEntry,
    Memory,
    MemoryType,
    Relation,
    ReviewStatus,
    _ToDict,
)

__all__ = ["EMBEDDING_DECISIONS", "ReviewOutcome", "Reviewer", "kept_apart"]

#: Rejections decided without a model: what ``review --llm`` asks the model about.
EMBEDDING_DECISIONS = frozenset(
    {Decision.AUTO_REJECT, Decision.REPLACED, Decision.FALLBACK_REJECT, Decision.JANITOR_MERGE}
)


@dataclass(frozen=True, slots=True)
class ReviewOutcome(_ToDict):
    """What one review did: ``action`` ``confirmed``, ``reversed`` (``restored`` is the memory
    written back) or ``conflict`` (a live memory, ``conflict_id``, already holds the text:
    nothing written); ``entry``: the row as it now stands. ``to_dict()``: the one serialisation
    of memlane's result types (:mod:`memlane.types`), which the CLI's ``--json`` prints and the
    HTTP API answers."""

    action: Literal["confirmed", "reversed", "conflict"]
    entry: DedupLogEntry
    message: str
    restored: Memory | None = None
    conflict_id: str | None = None
    reasoning: str | None = None


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
        """The decision stands. Of a decision that kept two memories apart (``gray_keep``,
        ``guard_keep``, ``*_keep``), the two are linked ``kept_apart``: the janitor never merges
        them afterwards.

        Raises:
            NotFound: no such row for ``owner``.
            InvalidArgument: the row was confirmed or reversed already (nothing would change).
        """
        entry = self._entry(owner, entry_id)
        if entry.review_status is not ReviewStatus.UNREVIEWED:
            raise InvalidArgument(
                f"dedup-log entry {entry_id} was {entry.review_status.value} already: "
                "nothing changed"
            )
        matched = self.store.get(owner, entry.existing_id) if entry.existing_id else None
        twin = None
        if matched is not None and not entry.decision.duplicate:
            twin = self.store.find_by_hash(
                owner, matched.agent, content_hash(entry.new_text), project=matched.project
            )
        with self.store.transaction():
            if matched is not None and twin is not None and twin.id != matched.id:
                self.store.add_association(owner, twin.id, matched.id, Relation.KEPT_APART, 1.0)
            entry = self.store.set_review_status(owner, entry_id, ReviewStatus.CONFIRMED)
        return ReviewOutcome("confirmed", entry, f"entry {entry_id} confirmed")

    def reverse(self, owner: str, entry_id: int, reasoning: str | None = None) -> ReviewOutcome:
        """Undo row ``entry_id``'s decision (see the module doc): the text it took out of the
        store becomes a memory of its own again, linked to the memory it was matched with
        (``related_to`` and ``kept_apart``, so no later janitor run merges them again). Of a
        ``replaced`` row that is the older text (the memory holds the newer one); of an
        ``llm_merge`` both: the memory gets its own text back and the offered one is restored.

        Raises:
            NotFound: no such row for ``owner``.
            InvalidArgument: the row was reversed already, its decision stored the text, or it
                is a ``hash_exact`` row (the offered text is the memory's own).
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
        if entry.decision is Decision.HASH_EXACT:
            raise InvalidArgument(
                f"dedup-log entry {entry_id} (hash_exact): the offered text is the kept memory's "
                "own text, nothing to restore"
            )
        matched = self.store.get(owner, entry.existing_id) if entry.existing_id else None
        agent = matched.agent if matched else None
        # the restored text goes back to the matched memory's project (the log keeps no other)
        project = matched.project if matched else None
        mtype = matched.type if matched else MemoryType.FACT
        replaced = entry.decision is Decision.REPLACED
        text = entry.existing_text if replaced and entry.existing_text else entry.new_text
        # an LLM merge rewrote the matched memory: it gets its own text back
        own = entry.existing_text if entry.decision is Decision.LLM_MERGE else None
        own = own if matched is not None and own and own != matched.content else None
        draft = self.writer.validate(
            MemoryInput(
                text,
                mtype,
                owner,
                agent,
                source="review",
                metadata={"restored_from_dedup_log": entry.id},
                project=project,
            )
        )
        live = self.store.find_by_hash(owner, agent, draft.content_hash, project=project)
        if live is not None:
            return self._conflict(entry, live.id, reasoning)
        texts = [draft.content] + ([own] if own else [])
        vectors = self.writer.embeddings.embed(texts)
        with self.store.transaction():
            twin = self.store.find_by_hash(owner, agent, draft.content_hash, project=project)
            if twin is not None:
                return self._conflict(entry, twin.id, reasoning)  # written by another process
            restored = self.store.insert(draft, vectors[0])
            if matched is not None:
                if own is not None:
                    self.store.replace_content(
                        owner, matched.id, own, content_hash(own), vectors[1], ChangeReason.UPDATE
                    )
                weight = min(max(float(entry.similarity or 0.0), 0.0), 1.0)
                for relation in (Relation.RELATED_TO, Relation.KEPT_APART):
                    self.store.add_association(owner, restored.id, matched.id, relation, weight)
            entry = self.store.set_review_status(owner, entry_id, ReviewStatus.REVERSED)
        what = "the older text" if replaced else "the text"
        return ReviewOutcome(
            "reversed",
            entry,
            f"entry {entry_id} reversed: {what} is memory {restored.id} again",
            restored=restored,
            reasoning=reasoning,
        )

    @staticmethod
    def _conflict(entry: DedupLogEntry, live_id: str, reasoning: str | None) -> ReviewOutcome:
        return ReviewOutcome(
            "conflict",
            entry,
            f"a live memory ({live_id}) already holds this text: nothing written (the entry "
            "stays unreviewed; `memlane show` that memory, or confirm the entry)",
            conflict_id=live_id,
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


def kept_apart(store: MemoryStore, owner: str, ids: Sequence[str]) -> set[frozenset[str]]:
    """The pairs among ``ids`` that a review kept apart (``kept_apart`` links: a reversed
    merge or rejection, a confirmed keep), each as a two-id frozenset. One read of the links of
    ``ids`` (the janitor's clustered memories)."""
    if not ids:
        return set()
    wanted = set(ids)
    return {
        frozenset((a.source_id, a.target_id))
        for a in store.neighbours(owner, list(wanted))
        if a.relation is Relation.KEPT_APART and a.source_id in wanted and a.target_id in wanted
    }
