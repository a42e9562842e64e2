"""MemoryEngine: the one public facade. It wires the components — the write path
(:class:`~memlane.dedup.write.WritePath`), the retriever (:class:`~memlane.retrieval.Retriever`),
the injector (:class:`~memlane.injection.Injector`) and the sessions
(:class:`~memlane.injection.Sessions`) — each of which takes only the store, the embeddings and
its own settings. Synchronous and cheap to call; the model loads on first use.

Scope: every call acts for an ``owner``: the one it names, else ``[scope] owner``, else
``"default"`` (:meth:`MemoryEngine.owner_of`, :func:`memlane.scope.resolve_owner`; every door
passes the owner it was given, or none, through it). Where it applies, an ``agent``, and a
``project`` (a repository's identity, :mod:`memlane.scope`): a memory is global to its owner
(``project=None``) or belongs to one project; reads in a project see its memories and the
global ones. A memory id outside the caller's scope is :class:`~memlane.errors.NotFound`,
exactly as a missing id.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memlane.config import Settings
from memlane.dedup.write import MemoryInput, WritePath, check_project, check_scope
from memlane.embeddings import Embedder, embedder_from_settings
from memlane.embeddings.cache import Embeddings
from memlane.errors import ConfigError, InvalidArgument, InvalidMemory, NotFound
from memlane.injection import Injector, Sessions
from memlane.llm import LLM, Learner, make_llm
from memlane.retrieval import Retriever
from memlane.scope import resolve_owner
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
from memlane.upkeep import Upkeep
from memlane.views import Views

__all__ = ["MemoryEngine", "MemoryInput"]


class MemoryEngine(Views, Upkeep):
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

    def owner_of(self, owner: str | None, agent: object = None) -> str:
        """The owner a call acts for: ``owner`` when given, else ``[scope] owner``, else
        ``"default"`` (:func:`memlane.scope.resolve_owner`). Raises :class:`InvalidArgument`
        for an empty or non-string ``owner`` given, or a bad ``agent``."""
        resolved = resolve_owner(None, self.settings.scope.owner) if owner is None else owner
        try:
            check_scope("owner", resolved, required=True)
            check_scope("agent", agent)
        except InvalidMemory as exc:
            raise InvalidArgument(str(exc)) from None
        return resolved

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
        owner: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        importance: float | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        project: str | None = None,
    ) -> WriteResult:
        """Offer one memory to the write path (validate, hash, embed, dedup; one transaction):
        global to the owner, or of ``project`` (deduplicated against what a turn in it sees:
        its memories and the global ones).

        Raises:
            InvalidMemory: empty, too long, an injected block, unknown type, bad importance.
            EmbeddingError: the model failed (nothing written).
            StoreError: the store failed (nothing written).
        """
        item = MemoryInput(
            content, type, owner, agent, session, importance, source, metadata or {}, project
        )
        return self.add_many([item])[0]

    def add_many(
        self, items: Iterable[MemoryInput | Mapping[str, Any]]
    ) -> builtins.list[WriteResult]:
        """Offer a batch (see :meth:`memlane.dedup.write.WritePath.add_many`): deduplicated
        against the store and within itself, written in one transaction. An item without an
        owner gets :meth:`owner_of`'s."""
        return self.writer.add_many([self._owned(i) for i in items])

    def _owned(self, item: MemoryInput | Mapping[str, Any]) -> MemoryInput:
        """``item`` as a :class:`MemoryInput` with the owner rule's owner when it names none."""
        one = item if isinstance(item, MemoryInput) else MemoryInput.from_dict(item)
        if one.owner is not None:
            return one
        return dataclasses.replace(one, owner=resolve_owner(None, self.settings.scope.owner))

    def learn(
        self,
        messages: Sequence[Any],
        *,
        owner: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        project: str | None = None,
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

        owner = self.owner_of(owner, agent)
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
            if project is not None:  # of the project the conversation was held in
                items = [dataclasses.replace(i, project=project) for i in items]
            results = self.writer.add_many(items) if items else []
        if session:  # only after the memories are written: a failure re-reads these messages
            self.store.set_learned_messages(owner, session, len(talk))
        return results

    def validate(self, item: MemoryInput) -> None:
        """Check one offered memory without writing it. Raises :class:`InvalidMemory`."""
        self.writer.validate(self._owned(item))

    # ------------------------------------------------------------------ other writes
    def update(
        self, memory_id: str, content: str, *, owner: str | None = None, agent: str | None = None
    ) -> Memory:
        """Give a memory of the scope new text (same id; the old text is kept in its history).

        Raises:
            NotFound: no active memory with that id in the scope.
            InvalidMemory: the new text is invalid (see :meth:`add`).
        """
        return self.writer.update(self.get(memory_id, owner=owner, agent=agent), content)

    def forget(
        self, memory_id: str, *, owner: str | None = None, agent: str | None = None
    ) -> Memory:
        """Mark a memory of the scope forgotten (kept on disk with its history; never searched
        or injected).

        Raises:
            NotFound: no active memory with that id in the scope.
        """
        return self.writer.forget(self.get(memory_id, owner=owner, agent=agent))

    def purge(
        self, memory_id: str | None, *, owner: str | None = None, agent: str | None = None
    ) -> int:
        """Delete a memory of the scope (any status) and every row holding its text, or with
        ``memory_id`` None everything of ``owner`` (docs/security.md). Returns the memories
        deleted. Raises :class:`NotFound` (no memory with that id in the scope)."""
        owner = self.owner_of(owner, agent)
        if memory_id is None:
            return self.store.purge(owner)
        memory = self.get(memory_id, owner=owner, agent=agent, include_inactive=True)
        return self.store.purge(owner, [memory.id])

    def restore(self, memory_id: str, *, owner: str | None = None) -> Memory:
        """Undo :meth:`forget` (:meth:`WritePath.restore`). Raises :class:`NotFound`."""
        return self.writer.restore(self.get(memory_id, owner=owner, include_inactive=True))

    # ------------------------------------------------------------------ reads
    def get(
        self,
        memory_id: str,
        *,
        owner: str | None = None,
        agent: str | None = None,
        include_inactive: bool = False,
    ) -> Memory:
        """The memory ``memory_id`` of ``owner`` (and of ``agent`` or shared, when given).

        Raises:
            NotFound: no such memory in the scope (or not active, unless ``include_inactive``);
                the same error whether the id exists for another owner or not at all.
        """
        owner = self.owner_of(owner, agent)
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
        owner: str | None = None,
        agent: str | None = None,
        type: MemoryType | str | None = None,
        limit: int = 100,
        status: Status | str = Status.ACTIVE,
        project: str | None = None,
    ) -> builtins.list[Memory]:
        """Memories of the scope with ``status`` (active by default), newest first; with
        ``project``, that project's and the global ones. Raises :class:`InvalidArgument`."""
        owner = self.owner_of(owner, agent)
        _check_project(project)
        mtype = None if type is None else parse_type(type, InvalidArgument)
        if limit < 1:
            raise InvalidArgument(f"limit must be >= 1, got {limit}")
        try:
            wanted = Status(status)
        except ValueError:
            names = ", ".join(s.value for s in Status)
            raise InvalidArgument(f"unknown status {status!r}; valid: {names}") from None
        return self.store.list_memories(
            owner, agent=agent, type=mtype, limit=limit, status=wanted, project=project
        )

    def history(
        self, memory_id: str, *, owner: str | None = None, agent: str | None = None
    ) -> builtins.list[MemoryVersion]:
        """Previous texts of a memory of the scope, oldest first. Raises :class:`NotFound`."""
        memory = self.get(memory_id, owner=owner, agent=agent, include_inactive=True)
        return self.store.history(memory.owner, memory_id)

    def associations(
        self, memory_id: str, *, owner: str | None = None, agent: str | None = None
    ) -> builtins.list[Association]:
        """Links of a memory of the scope (either direction). Raises :class:`NotFound`."""
        memory = self.get(memory_id, owner=owner, agent=agent, include_inactive=True)
        return self.store.associations(memory.owner, memory_id)

    def dedup_log(
        self,
        *,
        owner: str | None = None,
        decision: Decision | str | None = None,
        limit: int = 100,
    ) -> builtins.list[DedupLogEntry]:
        """``owner``'s dedup-log rows, newest first. Raises :class:`InvalidArgument`."""
        owner = self.owner_of(owner)
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
        owner: str | None = None,
        agent: str | None = None,
        limit: int = 10,
        types: Sequence[MemoryType | str] | None = None,
        mode: str = "hybrid",
        include_inactive: bool = False,
        project: str | None = None,
    ) -> builtins.list[SearchHit]:
        """Hybrid search (see :mod:`memlane.retrieval`); expired (superseded) memories only
        with ``include_inactive``; with ``project``, that project's memories and the global
        ones. Raises :class:`InvalidArgument`."""
        owner = self.owner_of(owner, agent)
        _check_project(project)
        return self.retriever.search(
            query,
            project=project,
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
        owner: str | None = None,
        agent: str | None = None,
        recent: Sequence[str] | None = None,
        max_chars: int | None = None,
        known: Sequence[str] = (),
        project: str | None = None,
    ) -> Injection:
        """The memories to inject before this turn (see :mod:`memlane.injection`); with
        ``max_chars`` the block is at most that many characters (lowest-ranked items left out,
        only what is in the block recorded as injected); ``known``: ids the conversation holds;
        with ``project``, of that project's memories and the global ones."""
        owner = self.owner_of(owner, agent)
        _check_project(project)
        return self.injector.inject(
            session, text, owner=owner, agent=agent, recent=recent, max_chars=max_chars,
            known=known, project=project,
        )  # fmt: skip

    def inject_pinned(
        self,
        session: str,
        *,
        owner: str | None = None,
        agent: str | None = None,
        max_chars: int | None = None,
        project: str | None = None,
    ) -> Injection:
        """Only the pinned memories (of ``project`` and global ones, when given), for the start
        of a session (nothing when ambient awareness is off); see
        :meth:`memlane.injection.Injector.inject_pinned`."""
        owner = self.owner_of(owner, agent)
        _check_project(project)
        return self.injector.inject_pinned(
            session, owner=owner, agent=agent, max_chars=max_chars, project=project
        )

    def reset_session(
        self, session: str, reason: ResetReason | str, *, owner: str | None = None
    ) -> SessionState:
        """Forget what ``session`` was shown (after compaction, /clear or a resume).

        Raises:
            InvalidArgument: ``reason`` is not ``compact``, ``clear`` or ``resume``.
        """
        return self.sessions.reset(session, reason, owner=self.owner_of(owner))

    def session(
        self, session: str, *, owner: str | None = None, agent: str | None = None
    ) -> SessionState:
        """The persisted injection tracking of ``session``; ``injected`` holds the memories
        within the window (``context_window_depth`` turns) of its current turn."""
        return self.sessions.state(session, owner=self.owner_of(owner, agent), agent=agent)


def _check_project(project: object) -> None:
    """Raise :class:`InvalidArgument` for a project that is not ``None`` or a non-empty
    string."""
    try:
        check_project(project)
    except InvalidMemory as exc:
        raise InvalidArgument(str(exc)) from None
