"""The engine's upkeep calls: the janitor (duplicate clusters merged), the review of dedup
decisions, the LLM's counters and the move of older releases' per-project agents into the
project scope. A base of :class:`memlane.engine.MemoryEngine`, which supplies
the store, the write path, the embeddings, the settings, the LLM and the owner rule
(:meth:`~memlane.engine.MemoryEngine.owner_of`).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memlane.dedup.write import check_project
from memlane.engine_parts import EngineParts
from memlane.errors import InvalidArgument, InvalidMemory
from memlane.types import DedupLogEntry

if TYPE_CHECKING:
    from memlane.dedup.janitor import JanitorReport
    from memlane.dedup.review import Reviewer, ReviewOutcome


class Upkeep(EngineParts):
    """:meth:`janitor`, :meth:`review_pending`, :meth:`review`, :meth:`review_with_llm`,
    :meth:`llm_stats`, :meth:`move_to_project` (see the module docstring)."""

    def janitor(
        self,
        *,
        owner: str | None = None,
        dry_run: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> JanitorReport:
        """Find duplicate clusters among stored memories and merge each into one (see
        :mod:`memlane.dedup.janitor`): of ``owner``, or of every owner one at a time (never
        across owners). ``dry_run``: plan only, nothing written. ``progress(label, done,
        total)`` is called as the work advances.

        Raises:
            InvalidArgument: an empty or non-string ``owner``.
            StoreError: the store failed (the cluster being merged is rolled back whole).
        """
        from memlane.dedup.janitor import Janitor

        if owner is None:
            owners = sorted({o for o, _, status, n in self.store.counts() if status == "active"})
        else:
            owners = [self.owner_of(owner)]
        janitor = Janitor(self.store, self.embeddings, self.settings.dedup, self.llm)
        return janitor.run(owners, dry_run=dry_run, progress=progress)

    # ------------------------------------------------------------------ review
    def _reviewer(self) -> Reviewer:
        from memlane.dedup.review import Reviewer

        return Reviewer(self.store, self.writer, self.llm)

    def review_pending(
        self, *, owner: str | None = None, limit: int = 100
    ) -> builtins.list[DedupLogEntry]:
        """``owner``'s unreviewed dedup-log rows, oldest first (unreviewed ``hash_exact`` rows
        are confirmed first: they need no review). See :mod:`memlane.dedup.review`."""
        return self._reviewer().pending(self.owner_of(owner), limit)

    def review(self, entry_id: int, action: str, *, owner: str | None = None) -> ReviewOutcome:
        """``confirm`` or ``reverse`` one dedup-log row. Reversing restores the offered text as
        a memory unless a live memory of the scope has the same hash (``conflict``: reported,
        nothing written).

        Raises:
            NotFound: no such row for ``owner``.
            InvalidArgument: an unknown action; a row already reversed, or whose decision stored
                the text (nothing to restore).
        """
        owner = self.owner_of(owner)
        reviewer = self._reviewer()
        if action == "confirm":
            return reviewer.confirm(owner, entry_id)
        if action == "reverse":
            return reviewer.reverse(owner, entry_id)
        raise InvalidArgument(f"unknown review action {action!r}; valid: confirm, reverse")

    def review_with_llm(
        self,
        *,
        owner: str | None = None,
        limit: int = 100,
        progress: Callable[[int, int], None] | None = None,
    ) -> builtins.list[ReviewOutcome]:
        """Ask the configured LLM about the unreviewed rejections made without one; each is
        confirmed or reversed. Raises :class:`ConfigError` without an LLM."""
        return self._reviewer().ask_llm(self.owner_of(owner), limit, progress)

    def llm_stats(self) -> dict[str, Any]:
        """The LLM's counters: provider, model, calls, failures, tokens in/out, latency."""
        llm = self.settings.llm
        stats = getattr(self.llm, "stats", None)
        counts = stats.as_dict() if stats is not None else {}
        return {
            "provider": getattr(self.llm, "provider", "custom") if self.llm is not None else "none",
            "model": llm.model or getattr(self.llm, "model", None) or None,
            **{"calls": 0, "failures": 0, "tokens_in": 0, "tokens_out": 0, "latency_s": 0.0},
            **counts,
        }

    def move_to_project(
        self, agent: str, new_agent: str | None, project: str, *, owner: str | None = None
    ) -> int:
        """Move the owner's global memories of exactly ``agent`` (every status) into
        ``project`` under ``new_agent``: the per-project agent names of older hooks
        (:mod:`memlane.hooks.legacy`). Returns how many moved.

        Raises:
            InvalidArgument: an empty ``agent``, or ``project`` not a project identity.
        """
        owner = self.owner_of(owner, agent)
        if project is None:
            raise InvalidArgument("project must be a project identity, got None")
        try:
            check_project(project)
        except InvalidMemory as exc:
            raise InvalidArgument(str(exc)) from None
        with self.store.transaction():
            return self.store.move_to_project(owner, agent, new_agent, project)
