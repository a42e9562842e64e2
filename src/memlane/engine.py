"""MemoryEngine: the one facade that wires settings, embedder, store, write path, retrieval and
injection. Synchronous and cheap to call; the model loads on first use."""

from __future__ import annotations

import builtins
import dataclasses
import json
import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane import retrieval
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.config import Settings
from memlane.dedup.pipeline import Plan, decide
from memlane.embeddings import Embedder, embed_texts, make_embedder
from memlane.errors import InvalidArgument, InvalidMemory, NotFound
from memlane.history import INJECTION_BLOCK_PREFIX, is_injection_text
from memlane.injection import pipeline as injection
from memlane.injection.pipeline import check_session, injected_within
from memlane.llm import LLM
from memlane.store import MemoryStore, NewMemory, open_store
from memlane.store.base import Vector
from memlane.types import (
    DEFAULT_IMPORTANCE,
    Association,
    Decision,
    DedupLogEntry,
    Injection,
    Memory,
    MemoryType,
    MemoryVersion,
    Relation,
    ResetReason,
    SearchHit,
    SessionState,
    Status,
    WriteResult,
)

log = logging.getLogger("memlane")


@dataclass(frozen=True, slots=True)
class MemoryInput:
    """One memory offered to :meth:`MemoryEngine.add_many` (same fields as ``add``)."""

    content: str
    type: MemoryType | str = MemoryType.FACT
    owner: str = "default"
    agent: str | None = None
    session: str | None = None
    importance: float | None = None
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryInput:
        """Build from a JSON object (``content`` required). Raises :class:`InvalidMemory`."""
        if not isinstance(data, Mapping):
            raise InvalidMemory(f"expected a JSON object, got {type(data).__name__}")
        unknown = set(data) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise InvalidMemory(
                f"unknown field(s) {sorted(unknown)}; allowed: {sorted(cls.__dataclass_fields__)}"
            )
        if "content" not in data:
            raise InvalidMemory("missing field 'content' (the memory text)")
        return cls(**{k: v for k, v in data.items() if v is not None or k == "content"})


class MemoryEngine:
    """Long-term memory for one home folder.

    Open with :meth:`open` (or construct with explicit parts for tests); use as a context manager
    or call :meth:`close`.
    """

    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        embedder: Embedder,
        llm: LLM | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_lock = threading.Lock()

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
        """
        settings = settings or Settings.load(home)
        if embedder is None:
            emb = settings.embedding
            embedder = make_embedder(emb.provider, model=emb.model, dimension=emb.dimension)
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
        return embed_texts(self.embedder, texts, self.settings.embedding.batch_size)

    def embed_query(self, text: str) -> Vector:
        """One query embedding (LRU-cached per process), shape ``(dimension,)``."""
        size = self.settings.embedding.cache_size
        with self._cache_lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vec: Vector = self.embed([text])[0]
        if size:
            with self._cache_lock:
                self._cache[text] = vec
                while len(self._cache) > size:
                    self._cache.popitem(last=False)
        return vec

    # ------------------------------------------------------------------ validation
    def validate(self, item: MemoryInput) -> NewMemory:
        """Check one offered memory; returns it normalised. Raises :class:`InvalidMemory`."""
        content = item.content
        if not isinstance(content, str):
            raise InvalidMemory(f"content must be a string, got {type(content).__name__}")
        text = content.strip()
        if not text:
            raise InvalidMemory("content is empty: a memory needs some text")
        limit = self.settings.dedup.max_chars
        if len(text) > limit:
            raise InvalidMemory(
                f"content is {len(text):,} characters, over the limit of {limit:,} "
                "(split it, or raise [dedup] max_chars)"
            )
        if is_injection_text(text):
            raise InvalidMemory(
                f"content starts with {INJECTION_BLOCK_PREFIX!r}: it is an injected context block, "
                "and injected context must never become a memory (strip it before saving)"
            )
        mtype = retrieval.parse_type(item.type, InvalidMemory)
        importance = DEFAULT_IMPORTANCE[mtype] if item.importance is None else item.importance
        if (
            isinstance(importance, bool)
            or not isinstance(importance, int | float)
            or not 0.0 <= importance <= 1.0
            or math.isnan(importance)
        ):
            raise InvalidMemory(f"importance must be a number from 0 to 1, got {importance!r}")
        _check_scope("owner", item.owner, required=True)
        _check_scope("agent", item.agent)
        _check_scope("session", item.session)
        if item.source is not None and not isinstance(item.source, str):
            raise InvalidMemory(f"source must be a string, got {type(item.source).__name__}")
        if not isinstance(item.metadata, Mapping):
            raise InvalidMemory(
                f"metadata must be a JSON object, got {type(item.metadata).__name__}"
            )
        try:
            metadata = json.loads(json.dumps(dict(item.metadata)))
        except (TypeError, ValueError) as exc:
            raise InvalidMemory(f"metadata is not JSON-serialisable: {exc}") from None
        return NewMemory(
            id=new_id(),
            content=text,
            content_hash=content_hash(text),
            type=mtype,
            importance=float(importance),
            owner=item.owner,
            agent=item.agent,
            session=item.session,
            source=item.source,
            created_at=utcnow(),
            metadata=metadata,
        )

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
        """
        item = MemoryInput(content, type, owner, agent, session, importance, source, metadata or {})
        return self.add_many([item])[0]

    def add_many(
        self, items: Iterable[MemoryInput | Mapping[str, Any]]
    ) -> builtins.list[WriteResult]:
        """Offer a batch: validated first (any invalid item -> :class:`InvalidMemory`, nothing
        written), embedded in batches, then deduplicated against the store *and* against earlier
        items of the batch, all in one transaction. Results are in input order."""
        inputs = [i if isinstance(i, MemoryInput) else MemoryInput.from_dict(i) for i in items]
        drafts: builtins.list[NewMemory] = []
        for n, item in enumerate(inputs):
            try:
                drafts.append(self.validate(item))
            except InvalidMemory as exc:
                if len(inputs) == 1:
                    raise
                raise InvalidMemory(f"item {n}: {exc}") from None
        if not drafts:
            return []
        # Exact repeats need no embedding: only embed texts whose hash is not stored yet, and
        # each such text once (a batch may repeat a line).
        texts = builtins.list(
            dict.fromkeys(
                d.content
                for d in drafts
                if self.store.find_by_hash(d.owner, d.agent, d.content_hash) is None
            )
        )
        vectors: dict[str, Vector] = {}
        if texts:
            vectors = dict(zip(texts, self.embed(texts), strict=True))
        with self.store.transaction():
            results = [self._write_one(d, vectors.get(d.content)) for d in drafts]
        for r in results:
            log.debug("write %s %s sim=%s", r.decision.value, r.memory.id, r.similarity)
        return results

    def _write_one(self, draft: NewMemory, vec: Vector | None) -> WriteResult:
        """Write one draft inside the batch's transaction; ``vec`` is ``None`` when its hash was
        stored before the transaction began."""
        store = self.store
        provenance = _provenance(draft)
        existing = store.find_by_hash(draft.owner, draft.agent, draft.content_hash)
        if existing is not None:
            kept = store.confirm(existing.id, provenance)
            self._log(draft, existing, 1.0, Decision.HASH_EXACT, "same content hash", "confirmed")
            return WriteResult(Decision.HASH_EXACT, kept, existing.id, 1.0, "same content hash")
        if vec is None:  # its stored twin was changed or forgotten meanwhile (another process)
            vec = self.embed([draft.content])[0]
        near = store.nearest(draft.owner, draft.agent, vec, self.settings.dedup.neighbours)
        match, sim = (near[0][0], near[0][1]) if near else (None, None)
        plan = decide(draft.content, match, sim, self.settings.dedup, self.llm)
        return self._apply(plan, draft, vec, provenance)

    def _apply(
        self, plan: Plan, draft: NewMemory, vec: Vector, provenance: Mapping[str, Any]
    ) -> WriteResult:
        store = self.store
        match = plan.match
        text = plan.replace_text
        if text is not None and text != draft.content and not self._valid_merge(text):
            # An LLM's merged text must obey the same rules as any memory: keep both instead.
            plan = Plan(
                Decision.FALLBACK_KEEP,
                match,
                plan.similarity,
                "the LLM's merged text is not a valid memory; kept both",
                link=True,
            )
        if plan.decision is not Decision.ADDED:
            assert match is not None
            self._log(draft, match, plan.similarity, plan.decision, plan.reasoning)
        if plan.keep_existing:
            assert match is not None
            kept = store.confirm(match.id, provenance)
            return WriteResult(plan.decision, kept, match.id, plan.similarity, plan.reasoning)
        if plan.replace_text is not None:
            assert match is not None
            text = plan.replace_text
            new_vec = vec if text == draft.content else self.embed([text])[0]
            store.replace_content(
                match.id, text, content_hash(text), new_vec, reason=plan.decision.value
            )
            kept = store.confirm(match.id, provenance)
            return WriteResult(plan.decision, kept, match.id, plan.similarity, plan.reasoning)
        memory = store.insert(draft, vec)
        if plan.link and match is not None:
            store.add_association(
                memory.id, match.id, Relation.RELATED_TO, round(float(plan.similarity or 0.0), 4)
            )
        matched = match.id if match is not None and plan.decision is not Decision.ADDED else None
        return WriteResult(plan.decision, memory, matched, plan.similarity, plan.reasoning)

    def _valid_merge(self, text: str) -> bool:
        try:
            self.validate(MemoryInput(text))
        except InvalidMemory:
            return False
        return True

    def _log(
        self,
        draft: NewMemory,
        existing: Memory,
        similarity: float | None,
        decision: Decision,
        reasoning: str | None,
        review_status: str = "unreviewed",
    ) -> None:
        self.store.log_dedup(
            owner=draft.owner,
            new_text=draft.content,
            existing_id=existing.id,
            existing_text=existing.content,
            similarity=None if similarity is None else round(float(similarity), 6),
            decision=decision.value,
            reasoning=reasoning,
            review_status=review_status,
        )

    # ------------------------------------------------------------------ other writes
    def update(self, memory_id: str, content: str) -> Memory:
        """Give a memory new text (same id; the old text is kept in its history).

        Raises:
            NotFound: no active memory with that id.
            InvalidMemory: the new text is invalid (see :meth:`add`).
        """
        current = self.get(memory_id)
        draft = self.validate(MemoryInput(content, current.type, current.owner, current.agent))
        vec = self.embed([draft.content])[0]
        with self.store.transaction():
            return self.store.replace_content(
                memory_id, draft.content, draft.content_hash, vec, reason="update"
            )

    def forget(self, memory_id: str) -> Memory:
        """Mark a memory forgotten (kept on disk with its history; never searched or injected).

        Raises:
            NotFound: no active memory with that id.
        """
        self.get(memory_id)
        with self.store.transaction():
            return self.store.set_status(memory_id, Status.FORGOTTEN)

    # ------------------------------------------------------------------ reads
    def get(self, memory_id: str, *, include_inactive: bool = False) -> Memory:
        """The memory with ``memory_id``. Raises :class:`NotFound`."""
        memory = self.store.get(memory_id)
        if memory is None or (memory.status is not Status.ACTIVE and not include_inactive):
            raise NotFound(
                f"no memory with id {memory_id!r} (see `memlane list` for the ids in a scope)"
            )
        return memory

    def list(
        self,
        *,
        owner: str = "default",
        agent: str | None = None,
        type: MemoryType | str | None = None,
        limit: int = 100,
    ) -> builtins.list[Memory]:
        """Active memories of ``owner``, newest first."""
        mtype = None if type is None else retrieval.parse_type(type)
        if limit < 1:
            raise InvalidArgument(f"limit must be >= 1, got {limit}")
        return self.store.list_memories(owner, agent=agent, type=mtype, limit=limit)

    def history(self, memory_id: str) -> builtins.list[MemoryVersion]:
        """Previous texts of a memory, oldest first. Raises :class:`NotFound`."""
        self.get(memory_id, include_inactive=True)
        return self.store.history(memory_id)

    def associations(self, memory_id: str) -> builtins.list[Association]:
        self.get(memory_id, include_inactive=True)
        return self.store.associations(memory_id)

    def dedup_log(
        self, *, owner: str | None = None, decision: Decision | str | None = None, limit: int = 100
    ) -> builtins.list[DedupLogEntry]:
        """Rows of the dedup log, newest first."""
        if decision is not None:
            try:
                decision = Decision(decision)
            except ValueError:
                names = ", ".join(d.value for d in Decision)
                raise InvalidArgument(f"unknown decision {decision!r}; valid: {names}") from None
        return self.store.dedup_log(
            owner=owner, decision=None if decision is None else decision.value, limit=limit
        )

    def count(self, owner: str | None = None) -> int:
        return self.store.count(owner)

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
    ) -> builtins.list[SearchHit]:
        """Hybrid search (see :mod:`memlane.retrieval`). Raises :class:`InvalidArgument`."""
        return retrieval.search(
            self, query, owner=owner, agent=agent, limit=limit, types=types, mode=mode
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
    ) -> Injection:
        """The memories to inject before this turn (see :mod:`memlane.injection`)."""
        return injection.inject(self, session, text, owner=owner, agent=agent, recent=recent)

    def reset_session(
        self, session: str, reason: ResetReason | str, *, owner: str = "default"
    ) -> SessionState:
        """Forget what ``session`` was shown (after compaction, /clear or a resume).

        Raises:
            InvalidArgument: ``reason`` is not ``compact``, ``clear`` or ``resume``.
        """
        try:
            why = ResetReason(reason)
        except ValueError:
            names = ", ".join(r.value for r in ResetReason)
            raise InvalidArgument(f"unknown reset reason {reason!r}; valid: {names}") from None
        check_session(session)
        state = self.store.reset_session(owner, session, why.value)
        log.info("session %s reset (%s)", session, why.value)
        return state

    def session(self, session: str, *, owner: str = "default") -> SessionState:
        """The persisted injection tracking of ``session``; ``injected`` holds the memories
        within the window (``context_window_depth`` turns) of its current turn."""
        check_session(session)
        state = self.store.session(owner, session)
        depth = self.settings.injection.context_window_depth
        return dataclasses.replace(state, injected=injected_within(state, state.turn, depth))


def _provenance(draft: NewMemory) -> dict[str, Any]:
    out: dict[str, Any] = dict(draft.metadata)
    if draft.source:
        out["sources"] = [draft.source]
    if draft.session:
        out["sessions"] = [draft.session]
    return out


def _check_scope(name: str, value: object, *, required: bool = False) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise InvalidMemory(f"{name} must be a non-empty string, got {value!r}")
