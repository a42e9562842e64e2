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

The calls are grouped by cohesion: the writes in :class:`~memlane.writes.Writes`, what the doors
show beside memories in :class:`~memlane.views.Views`, the janitor and the review in
:class:`~memlane.upkeep.Upkeep`; the reads, the search and the injection here.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
from collections.abc import Sequence

from memlane.config import Settings
from memlane.dedup.write import MemoryInput, WritePath, check_project, check_scope
from memlane.embeddings import Embedder, embedder_from_settings
from memlane.embeddings.cache import Embeddings
from memlane.errors import InvalidArgument, InvalidMemory, NotFound
from memlane.injection import Injector, Sessions, format_block
from memlane.injection.cut import Verdict
from memlane.injection.explain import candidates
from memlane.injection.sessions import SyncResult
from memlane.injection.turn import TurnModel
from memlane.llm import LLM, make_llm
from memlane.privacy import clean_name
from memlane.retrieval import ModeRetriever, Recipe, Retriever
from memlane.scope import ScopeError, check_owner, resolve_owner
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
    Turn,
    parse_type,
)
from memlane.upkeep import Upkeep
from memlane.views import Views
from memlane.writes import Writes

__all__ = ["MemoryEngine", "MemoryInput"]


class MemoryEngine(Writes, Views, Upkeep):
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
        self.turns = TurnModel(self.store, self.injector, self.sessions, settings.injection_for)
        self.settings = settings

    def injector_in_mode(self, mode: str) -> Injector:
        """An injector over this engine's store and settings whose every search runs in
        ``mode`` (``hybrid``: the engine's own; ``vector`` or ``fts``: that leg alone), for
        measuring what each leg would inject (``memlane replay``'s first-turn figures).
        Raises :class:`InvalidArgument` for another mode."""
        if mode == "hybrid":
            return self.injector
        if mode not in ("vector", "fts"):
            raise InvalidArgument(f"mode must be hybrid, vector or fts, got {mode!r}")
        retriever = ModeRetriever(self.retriever, mode)
        return Injector(self.store, retriever, self.settings.injection_for)

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
        ``"default"`` (:func:`memlane.scope.resolve_owner`), normalised
        (:func:`memlane.scope.check_owner`: NFC, at most 128 characters, no control or
        zero-width character). Raises :class:`InvalidArgument`
        for an empty or non-string ``owner`` given, or a bad ``agent``."""
        resolved = resolve_owner(None, self.settings.scope.owner) if owner is None else owner
        try:
            check_scope("owner", resolved, required=True)
            check_scope("agent", agent)
            # normalised and limited here, for every door (issue #33, docs/security.md)
            return check_owner(resolved)
        except (InvalidMemory, ScopeError) as exc:
            raise InvalidArgument(str(exc)) from None

    # ------------------------------------------------------------------ embeddings
    def embed(self, texts: Sequence[str]) -> Vector:
        """Unit-norm float32 embeddings, shape ``(len(texts), dimension)``."""
        return self.embeddings.embed(texts)

    def embed_query(self, text: str) -> Vector:
        """One query embedding (LRU-cached per process), shape ``(dimension,)``."""
        return self.embeddings.embed_query(text)

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
        mode: str | Recipe = "hybrid",
        include_inactive: bool = False,
        project: str | None = None,
        record_access: bool = True,
    ) -> builtins.list[SearchHit]:
        """Hybrid search (see :mod:`memlane.retrieval`); expired (superseded) memories only
        with ``include_inactive``; with ``project``, that project's memories and the global
        ones. ``mode``: ``hybrid``, ``vector``, ``fts`` or a :class:`~memlane.retrieval.Recipe`
        (the replay's side-by-side runs); ``record_access=False`` leaves the hits' access
        counts as they were (the replay's measurements). Raises :class:`InvalidArgument`."""
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
            record_access=record_access,
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
            named(session), text, owner=owner, agent=agent, recent=recent, max_chars=max_chars,
            known=known, project=project,
        )  # fmt: skip

    def explain_injection(
        self,
        text: str,
        *,
        owner: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        recent: Sequence[str] | None = None,
    ) -> builtins.list[Verdict]:
        """Why an injection of ``text`` would hold what it holds, without injecting: each
        candidate of its search with its legs' ranks and scores and the cut's rule in words
        (:func:`memlane.injection.explain.candidates`; nothing recorded). Raises
        :class:`InvalidArgument` for an empty ``text``."""
        _check_project(project)
        return candidates(
            self.injector, text, owner=self.owner_of(owner, agent), agent=agent,
            project=project, recent=recent,
        )  # fmt: skip

    def turn(
        self,
        session: str,
        message: str,
        *,
        kept: bool,
        position: int | None = None,
        owner: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        recent: Sequence[str] | None = None,
        max_chars: int | None = None,
        known: Sequence[str] = (),
        key: str | None = None,
    ) -> Turn:
        """One model call's memory under the turn model every door shares
        (:mod:`memlane.injection.turn`): the turn's block is decided once (by :meth:`inject`)
        and given back unchanged, nothing recorded, on every later call of the turn
        (``Turn.repeat``). ``message``: the user message that started the turn; ``kept``:
        whether the door's block stays in the history its client sends next turn (``False``:
        ``Turn.earlier`` gives the earlier turns' blocks still within the window, for the door
        to put back); ``position``: the user turns the conversation holds, this one included
        (one not above every recorded position resets the session: ``Turn.reset``); ``key``:
        the door's own turn id (default: a digest of owner, session, position and message;
        only digests are stored). The rest as for :meth:`inject`.

        Raises:
            InvalidArgument: a bad argument, named in the message; nothing is recorded.
            StoreError: the store failed.
        """
        owner = self.owner_of(owner, agent)
        _check_project(project)
        return self.turns.turn(
            named(session), message, kept=kept, owner=owner, position=position, agent=agent,
            project=project, recent=recent, max_chars=max_chars, known=known, key=key,
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
            named(session), owner=owner, agent=agent, max_chars=max_chars, project=project
        )

    def reset_session(
        self, session: str, reason: ResetReason | str, *, owner: str | None = None
    ) -> SessionState:
        """Forget what ``session`` was shown (after compaction, /clear or a resume).

        Raises:
            InvalidArgument: ``reason`` is not ``compact``, ``clear`` or ``resume``.
        """
        return self.sessions.reset(named(session), reason, owner=self.owner_of(owner))

    def sync_session(
        self, session: str, text: str, *, owner: str | None = None, agent: str | None = None
    ) -> SyncResult:
        """Compare ``session``'s tracking with ``text``, the memlane blocks of one request of
        the client to its model (:meth:`memlane.injection.Sessions.sync`); the result's
        ``block`` holds the memories shown within the window that the request lacks, for the
        caller to add to that request (``None`` when it lacks none).

        Raises:
            InvalidArgument: empty session, or ``text`` not a string.
        """
        owner = self.owner_of(owner, agent)
        done = self.sessions.sync(named(session), text, owner=owner, agent=agent)
        return dataclasses.replace(done, block=format_block((), done.missing))

    def session(
        self, session: str, *, owner: str | None = None, agent: str | None = None
    ) -> SessionState:
        """The persisted injection tracking of ``session``; ``injected`` holds the memories
        within the window (``context_window_depth`` turns) of its current turn."""
        owner = self.owner_of(owner, agent)
        return self.sessions.state(named(session), owner=owner, agent=agent)


def named(session: str) -> str:
    """The session id as stored: :func:`memlane.privacy.clean_name` (a secret in it redacted,
    ``<private>`` spans removed; issue #33), the same for every call naming it. A non-string is
    passed on for the component's own check to refuse."""
    return clean_name(session) if isinstance(session, str) else session


def _check_project(project: object) -> None:
    """Raise :class:`InvalidArgument` for a project that is not ``None`` or a non-empty
    string."""
    try:
        check_project(project)
    except InvalidMemory as exc:
        raise InvalidArgument(str(exc)) from None
