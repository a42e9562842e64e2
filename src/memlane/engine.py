"""MemoryEngine: the one public facade. It wires the components — the write path
(:class:`~memlane.dedup.write.WritePath`), the retriever (:class:`~memlane.retrieval.Retriever`),
the injector (:class:`~memlane.injection.Injector`) and the sessions
(:class:`~memlane.injection.Sessions`) — each of which takes only the store, the embeddings and
its own settings. Synchronous and cheap to call; the model loads on first use.

Scope: every call names an ``owner`` (default ``"default"``) and, where it applies, an
``agent``. A memory id outside the caller's scope is :class:`~memlane.errors.NotFound`, exactly as
a missing id.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memlane.config import Settings
from memlane.dedup.write import MemoryInput, WritePath, check_scope
from memlane.embeddings import Embedder, embedder_from_settings
from memlane.embeddings.cache import Embeddings
from memlane.errors import ConfigError, InvalidArgument, InvalidMemory, NotFound
from memlane.injection import Injector, Sessions
from memlane.llm import LLM, Learner, make_llm
from memlane.retrieval import Retriever
from memlane.store import MemoryStore, open_store
from memlane.store.base import Vector
from memlane.types import (
    Association,
    Decision,
    DedupLogEntry,
    Injection,
    Memory,
    MemoryType,
    MemoryVersion,
    ResetReason,
    SearchHit,
    SessionState,
    Status,
    WriteResult,
    parse_type,
)
from memlane.views import Views

if TYPE_CHECKING:
    from memlane.dedup.janitor import JanitorReport
    from memlane.dedup.review import Reviewer, ReviewOutcome

__all__ = ["MemoryEngine", "MemoryInput"]


class MemoryEngine(Views):
    """Long-term memory for one home folder.

    Open with :meth:`open` (or construct with explicit parts for tests); use as a context manager
    or call :meth:`close`. Thread-safe: the store serialises its own access.
    """

    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        embedder: Embedder,
        llm: LLM | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.llm = llm
        emb = settings.embedding
        self.embeddings = Embeddings(embedder, batch_size=emb.batch_size, cache_size=emb.cache_size)
        self._build(settings)

    def _build(self, settings: Settings) -> None:
        self.writer = WritePath(
            self.store, self.embeddings, settings.dedup, self.llm, secrets=settings.privacy.secrets
        )
        self.retriever = Retriever(self.store, self.embeddings, settings.retrieval)
        self.injector = Injector(self.store, self.retriever, settings.injection_for)
        self.sessions = Sessions(self.store, settings.injection_for)
        self.settings = settings

    def reload_settings(self, settings: Settings) -> Settings:
        """Use ``settings`` from the next call on (the server's hot reload): the write path, the
        retriever, the injector and the sessions are rebuilt with their new slices. The store
        and the embedding model stay open, so ``[store]`` and ``[embedding]`` keep their
        current values (changing them needs a restart). Returns the settings now in use."""
        kept = settings.model_copy(
            update={"store": self.settings.store, "embedding": self.settings.embedding}
        )
        self._build(kept)
        return kept

    @classmethod
    def open(
        cls,
        home: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
    ) -> MemoryEngine:
        """Open the store of ``home`` (see :func:`memlane.config.resolve_home`).

        Raises:
            ConfigError: invalid ``memlane.toml`` or ``MEMLANE_*`` values.
            EmbeddingMismatch: the store was built with another embedding model.
            StoreError: the store cannot be opened (its subclasses say why).
        """
        settings = settings or Settings.load(home)
        if embedder is None:
            emb = settings.embedding
            embedder = embedder_from_settings(emb)
        if llm is None:
            llm = make_llm(settings.llm)
        store = open_store(settings, embedder)
        return cls(settings, store, embedder, llm)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ embeddings
    def embed(self, texts: Sequence[str]) -> Vector:
        """Unit-norm float32 embeddings, shape ``(len(texts), dimension)``."""
        return self.embeddings.embed(texts)

    def embed_query(self, text: str) -> Vector:
        """One query embedding (LRU-cached per process), shape ``(dimension,)``."""
        return self.embeddings.embed_query(text)

    # ------------------------------------------------------------------ write path
    def add(
        self,
        content: str,
        *,
        type: MemoryType | str = MemoryType.FACT,
        owner: str = "default",
        agent: str | None = None,
        session: str | None = None,
        importance: float | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """Offer one memory to the write path (validate, hash, embed, dedup; one transaction).

        Raises:
            InvalidMemory: empty, too long, an injected block, unknown type, bad importance.
            EmbeddingError: the model failed (nothing written).
            StoreError: the store failed (nothing written).
        """
        item = MemoryInput(content, type, owner, agent, session, importance, source, metadata or {})
        return self.writer.add_many([item])[0]

    def add_many(
        self, items: Iterable[MemoryInput | Mapping[str, Any]]
    ) -> builtins.list[WriteResult]:
        """Offer a batch (see :meth:`memlane.dedup.write.WritePath.add_many`): deduplicated
        against the store and within itself, written in one transaction."""
        return self.writer.add_many(items)

    def learn(
        self,
        messages: Sequence[Any],
        *,
        owner: str = "default",
        agent: str | None = None,
        session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> builtins.list[WriteResult]:
        """Extract memories from a conversation with the configured LLM and offer them to the
        write path as one batch. Injected ``[Context from memory]`` blocks never reach the model.
        With a ``session``, only the messages after those learned from before are read (the
        same growing history can be passed every turn). ``metadata`` goes on every memory.

        Raises:
            ConfigError: no LLM configured (``[llm] provider``).
            LLMError: the model failed or answered malformed JSON (nothing written).
        """
        from memlane.history import is_injection_block
        from memlane.learn import conversation_text, to_inputs

        _check_owner(owner, agent)
        check_scope("session", session)
        if not isinstance(self.llm, Learner):
            raise ConfigError(
                "llm.provider",
                self.settings.llm.provider,
                "learning from conversations needs an LLM: set [llm] provider to openai or "
                "anthropic (and model) in memlane.toml or MEMLANE_LLM__PROVIDER",
            )
        talk = [m for m in messages if not is_injection_block(m)]
        start = self.store.learned_messages(owner, session) if session else 0
        if start > len(talk):  # a shorter history (compacted, or another conversation): all
            start = 0
        transcript = conversation_text(talk[start:])
        results: builtins.list[WriteResult] = []
        if transcript.strip():
            extracted = self.llm.extract_memories(transcript)
            items = to_inputs(
                extracted, owner=owner, agent=agent, session=session, metadata=metadata
            )
            results = self.writer.add_many(items) if items else []
        if session:  # only after the memories are written: a failure re-reads these messages
            self.store.set_learned_messages(owner, session, len(talk))
        return results

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
            _check_owner(owner, None)
            owners = [owner]
        janitor = Janitor(self.store, self.embeddings, self.settings.dedup, self.llm)
        return janitor.run(owners, dry_run=dry_run, progress=progress)

    # ------------------------------------------------------------------ review
    def _reviewer(self) -> Reviewer:
        from memlane.dedup.review import Reviewer

        return Reviewer(self.store, self.writer, self.llm)

    def review_pending(
        self, *, owner: str = "default", limit: int = 100
    ) -> builtins.list[DedupLogEntry]:
        """``owner``'s unreviewed dedup-log rows, oldest first (unreviewed ``hash_exact`` rows
        are confirmed first: they need no review). See :mod:`memlane.dedup.review`."""
        _check_owner(owner, None)
        return self._reviewer().pending(owner, limit)

    def review(self, entry_id: int, action: str, *, owner: str = "default") -> ReviewOutcome:
        """``confirm`` or ``reverse`` one dedup-log row. Reversing restores the offered text as
        a memory unless a live memory of the scope has the same hash (``conflict``: reported,
        nothing written).

        Raises:
            NotFound: no such row for ``owner``.
            InvalidArgument: an unknown action; a row already reversed, or whose decision stored
                the text (nothing to restore).
        """
        _check_owner(owner, None)
        reviewer = self._reviewer()
        if action == "confirm":
            return reviewer.confirm(owner, entry_id)
        if action == "reverse":
            return reviewer.reverse(owner, entry_id)
        raise InvalidArgument(f"unknown review action {action!r}; valid: confirm, reverse")

    def review_with_llm(
        self,
        *,
        owner: str = "default",
        limit: int = 100,
        progress: Callable[[int, int], None] | None = None,
    ) -> builtins.list[ReviewOutcome]:
        """Ask the configured LLM about the unreviewed rejections made without one; each is
        confirmed or reversed. Raises :class:`ConfigError` without an LLM."""
        _check_owner(owner, None)
        return self._reviewer().ask_llm(owner, limit, progress)

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

    def validate(self, item: MemoryInput) -> None:
        """Check one offered memory without writing it. Raises :class:`InvalidMemory`."""
        self.writer.validate(item)

    # ------------------------------------------------------------------ other writes
    def update(
        self, memory_id: str, content: str, *, owner: str = "default", agent: str | None = None
    ) -> Memory:
        """Give a memory of the scope new text (same id; the old text is kept in its history).

        Raises:
            NotFound: no active memory with that id in the scope.
            InvalidMemory: the new text is invalid (see :meth:`add`).
        """
        return self.writer.update(self.get(memory_id, owner=owner, agent=agent), content)

    def forget(self, memory_id: str, *, owner: str = "default", agent: str | None = None) -> Memory:
        """Mark a memory of the scope forgotten (kept on disk with its history; never searched
        or injected).

        Raises:
            NotFound: no active memory with that id in the scope.
        """
        return self.writer.forget(self.get(memory_id, owner=owner, agent=agent))

    def purge(
        self, memory_id: str | None, *, owner: str = "default", agent: str | None = None
    ) -> int:
        """Delete a memory of the scope (any status) and every row holding its text, or with
        ``memory_id`` None everything of ``owner`` (docs/security.md). Returns the memories
        deleted. Raises :class:`NotFound` (no memory with that id in the scope)."""
        _check_owner(owner, agent)
        if memory_id is None:
            return self.store.purge(owner)
        memory = self.get(memory_id, owner=owner, agent=agent, include_inactive=True)
        return self.store.purge(owner, [memory.id])

    def restore(self, memory_id: str, *, owner: str = "default") -> Memory:
        """Undo :meth:`forget` (:meth:`WritePath.restore`). Raises :class:`NotFound`."""
        return self.writer.restore(self.get(memory_id, owner=owner, include_inactive=True))

    # ------------------------------------------------------------------ reads
    def get(
        self,
        memory_id: str,
        *,
        owner: str = "default",
        agent: str | None = None,
        include_inactive: bool = False,
    ) -> Memory:
        """The memory ``memory_id`` of ``owner`` (and of ``agent`` or shared, when given).

        Raises:
            NotFound: no such memory in the scope (or not active, unless ``include_inactive``);
                the same error whether the id exists for another owner or not at all.
        """
        _check_owner(owner, agent)
        memory = self.store.get(owner, memory_id, agent=agent) if memory_id else None
        if memory is None or (memory.status is not Status.ACTIVE and not include_inactive):
            raise NotFound(
                f"no memory with id {memory_id!r} for owner {owner!r} "
                "(see `memlane list --owner ...` for the ids in a scope)"
            )
        return memory

    def list(
        self,
        *,
        owner: str = "default",
        agent: str | None = None,
        type: MemoryType | str | None = None,
        limit: int = 100,
        status: Status | str = Status.ACTIVE,
    ) -> builtins.list[Memory]:
        """Memories of the scope with ``status`` (active by default), newest first. Raises
        :class:`InvalidArgument`."""
        _check_owner(owner, agent)
        mtype = None if type is None else parse_type(type, InvalidArgument)
        if limit < 1:
            raise InvalidArgument(f"limit must be >= 1, got {limit}")
        try:
            wanted = Status(status)
        except ValueError:
            names = ", ".join(s.value for s in Status)
            raise InvalidArgument(f"unknown status {status!r}; valid: {names}") from None
        return self.store.list_memories(owner, agent=agent, type=mtype, limit=limit, status=wanted)

    def history(
        self, memory_id: str, *, owner: str = "default", agent: str | None = None
    ) -> builtins.list[MemoryVersion]:
        """Previous texts of a memory of the scope, oldest first. Raises :class:`NotFound`."""
        self.get(memory_id, owner=owner, agent=agent, include_inactive=True)
        return self.store.history(owner, memory_id)

    def associations(
        self, memory_id: str, *, owner: str = "default", agent: str | None = None
    ) -> builtins.list[Association]:
        """Links of a memory of the scope (either direction). Raises :class:`NotFound`."""
        self.get(memory_id, owner=owner, agent=agent, include_inactive=True)
        return self.store.associations(owner, memory_id)

    def dedup_log(
        self,
        *,
        owner: str = "default",
        decision: Decision | str | None = None,
        limit: int = 100,
    ) -> builtins.list[DedupLogEntry]:
        """``owner``'s dedup-log rows, newest first. Raises :class:`InvalidArgument`."""
        _check_owner(owner, None)
        wanted = None
        if decision is not None:
            try:
                wanted = Decision(decision)
            except ValueError:
                names = ", ".join(d.value for d in Decision)
                raise InvalidArgument(f"unknown decision {decision!r}; valid: {names}") from None
        return self.store.dedup_log(owner, decision=wanted, limit=limit)

    # ------------------------------------------------------------------ read path
    def search(
        self,
        query: str,
        *,
        owner: str = "default",
        agent: str | None = None,
        limit: int = 10,
        types: Sequence[MemoryType | str] | None = None,
        mode: str = "hybrid",
        include_inactive: bool = False,
    ) -> builtins.list[SearchHit]:
        """Hybrid search (see :mod:`memlane.retrieval`); expired (superseded) memories only
        with ``include_inactive``. Raises :class:`InvalidArgument`."""
        _check_owner(owner, agent)
        return self.retriever.search(
            query,
            owner=owner,
            agent=agent,
            limit=limit,
            types=types,
            mode=mode,
            include_inactive=include_inactive,
        )

    # ------------------------------------------------------------------ injection
    def inject(
        self,
        session: str,
        text: str,
        *,
        owner: str = "default",
        agent: str | None = None,
        recent: Sequence[str] | None = None,
        max_chars: int | None = None,
        known: Sequence[str] = (),
    ) -> Injection:
        """The memories to inject before this turn (see :mod:`memlane.injection`); with
        ``max_chars`` the block is at most that many characters (lowest-ranked items left out,
        only what is in the block recorded as injected); ``known``: ids the conversation holds."""
        _check_owner(owner, agent)
        return self.injector.inject(
            session, text, owner=owner, agent=agent, recent=recent, max_chars=max_chars, known=known
        )

    def inject_pinned(
        self,
        session: str,
        *,
        owner: str = "default",
        agent: str | None = None,
        max_chars: int | None = None,
    ) -> Injection:
        """Only the pinned memories, for the start of a session (nothing when ambient
        awareness is off); see :meth:`memlane.injection.Injector.inject_pinned`."""
        _check_owner(owner, agent)
        return self.injector.inject_pinned(session, owner=owner, agent=agent, max_chars=max_chars)

    def reset_session(
        self, session: str, reason: ResetReason | str, *, owner: str = "default"
    ) -> SessionState:
        """Forget what ``session`` was shown (after compaction, /clear or a resume).

        Raises:
            InvalidArgument: ``reason`` is not ``compact``, ``clear`` or ``resume``.
        """
        _check_owner(owner, None)
        return self.sessions.reset(session, reason, owner=owner)

    def session(
        self, session: str, *, owner: str = "default", agent: str | None = None
    ) -> SessionState:
        """The persisted injection tracking of ``session``; ``injected`` holds the memories
        within the window (``context_window_depth`` turns) of its current turn."""
        _check_owner(owner, agent)
        return self.sessions.state(session, owner=owner, agent=agent)


def _check_owner(owner: object, agent: object) -> None:
    """Raise :class:`InvalidArgument` for an empty or non-string scope."""
    try:
        check_scope("owner", owner, required=True)
        check_scope("agent", agent)
    except InvalidMemory as exc:
        raise InvalidArgument(str(exc)) from None
