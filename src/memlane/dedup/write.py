"""The write path (ARCHITECTURE.md, "Write path"): validate, hash, nearest, decide, apply, log.

:class:`WritePath` takes only what it uses: the store, the embeddings and the ``[dedup]``
settings (and the optional LLM of the gray zone). The decision itself is the pure
:func:`memlane.dedup.pipeline.decide`; this module reads its inputs and applies its plan.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane import privacy
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.config import DedupSettings
from memlane.dedup.limits import check_controls, check_metadata, check_text
from memlane.dedup.pipeline import Add, Keep, KeepApart, Plan, Rewrite, decide
from memlane.embeddings.cache import Embeddings
from memlane.errors import InvalidMemory, NotFound
from memlane.history import INJECTION_BLOCK_PREFIX, is_injection_text
from memlane.llm import LLM, BatchVerifier, LLMVerdict
from memlane.privacy import SecretsDecision
from memlane.scope import MAX_PROJECT_CHARS, ScopeError, check_owner
from memlane.store.base import MemoryStore, NewDedupLog, NewMemory, Vector
from memlane.types import (
    DEFAULT_IMPORTANCE,
    ChangeReason,
    Decision,
    Memory,
    MemoryType,
    Relation,
    ReviewStatus,
    Status,
    WriteResult,
    parse_type,
)

log = logging.getLogger("memlane")

#: Most neighbours a write asks the store for while other projects' memories crowd out the
#: draft's own scope (:meth:`WritePath._nearest`); past it the draft is compared to none.
MAX_SCOPE_NEIGHBOURS = 1024


@dataclass(frozen=True, slots=True)
class MemoryInput:
    """One memory offered to :meth:`MemoryEngine.add_many` (same fields as ``add``)."""

    content: str
    type: MemoryType | str = MemoryType.FACT
    #: ``None``: the scope rule's owner (:meth:`MemoryEngine.add_many` resolves it:
    #: :func:`memlane.scope.resolve_owner`).
    owner: str | None = None
    agent: str | None = None
    session: str | None = None
    importance: float | None = None
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: The project (a repository's identity, :mod:`memlane.scope`); ``None``: global to the
    #: owner, seen in every project.
    project: str | None = None

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


def check_scope(name: str, value: object, *, required: bool = False) -> None:
    """Raise :class:`InvalidMemory` unless ``value`` is a non-empty string (or ``None`` when
    not ``required``)."""
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise InvalidMemory(f"{name} must be a non-empty string, got {value!r}")


def check_project(value: object) -> None:
    """Raise :class:`InvalidMemory` unless ``value`` is ``None`` (global) or a project identity:
    a non-empty string of at most :data:`memlane.scope.MAX_PROJECT_CHARS` characters."""
    check_scope("project", value)
    if isinstance(value, str):
        check_text("project", value)
        if len(value) > MAX_PROJECT_CHARS:
            raise InvalidMemory(
                f"project is {len(value):,} characters, over the limit of {MAX_PROJECT_CHARS} "
                "(pass a repository's folder or its identity, such as github.com/acme/app)"
            )


class WritePath:
    """Offer memories to the store without duplicates; change and forget them by id."""

    def __init__(
        self,
        store: MemoryStore,
        embeddings: Embeddings,
        settings: DedupSettings,
        llm: LLM | None = None,
        *,
        secrets: SecretsDecision = "redact",
    ) -> None:
        self.store = store
        self.embeddings = embeddings
        self.settings = settings
        self.llm = llm
        #: ``[privacy] secrets``: redact or refuse a secret (memlane.privacy).
        self.secrets: SecretsDecision = secrets

    # ------------------------------------------------------------------ validation
    def validate(self, item: MemoryInput) -> NewMemory:
        """Check one offered memory; returns it normalised. Raises :class:`InvalidMemory`."""
        content = item.content
        if not isinstance(content, str):
            raise InvalidMemory(f"content must be a string, got {type(content).__name__}")
        check_text("content", content)
        check_controls("content", content)
        cleaned, redacted = privacy.clean(content, self.secrets)
        text = cleaned.strip()
        if not text:
            raise InvalidMemory(
                "content is empty: a memory needs some text"
                + (" outside its <private> spans" if content.strip() else "")
            )
        limit = self.settings.max_chars
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
        mtype = parse_type(item.type, InvalidMemory)
        importance = DEFAULT_IMPORTANCE[mtype] if item.importance is None else item.importance
        if (
            isinstance(importance, bool)
            or not isinstance(importance, int | float)
            or not 0.0 <= importance <= 1.0
            or math.isnan(importance)
        ):
            raise InvalidMemory(f"importance must be a number from 0 to 1, got {importance!r}")
        check_scope("owner", item.owner, required=True)
        try:
            owner = check_owner(item.owner)  # as every read names it (MemoryEngine.owner_of)
        except ScopeError as exc:
            raise InvalidMemory(str(exc)) from None
        check_scope("agent", item.agent)
        check_scope("session", item.session)
        check_project(item.project)
        if item.source is not None and not isinstance(item.source, str):
            raise InvalidMemory(f"source must be a string, got {type(item.source).__name__}")
        if item.source is not None:
            check_text("source", item.source)
        # Secret rules and <private> spans apply to every stored text, names too (issue #33):
        # a source URL with credentials keeps its host; a name is redacted, never refused.
        source = (
            None
            if item.source is None
            else privacy.clean(item.source, self.secrets, what="source")[0]
        )
        agent, session, project = (
            None if v is None else privacy.clean_name(v)
            for v in (item.agent, item.session, item.project)
        )
        for name, value in (("agent", agent), ("session", session), ("project", project)):
            check_scope(name, value)
        if not isinstance(item.metadata, Mapping):
            raise InvalidMemory(
                f"metadata must be a JSON object, got {type(item.metadata).__name__}"
            )
        metadata = privacy.clean_metadata(check_metadata(item.metadata), self.secrets)
        if redacted:
            metadata["redacted"] = sorted(set(redacted))
        return NewMemory(
            id=new_id(),
            content=text,
            content_hash=content_hash(text),
            type=mtype,
            importance=float(importance),
            owner=owner,
            agent=agent,
            session=session,
            source=source,
            created_at=utcnow(),
            metadata=metadata,
            project=project,
        )

    # ------------------------------------------------------------------ add
    def add_many(self, items: Iterable[MemoryInput | Mapping[str, Any]]) -> list[WriteResult]:
        """Offer a batch: validated first (any invalid item -> :class:`InvalidMemory`, nothing
        written), embedded in batches, then deduplicated against the store *and* against earlier
        items of the batch, all in one transaction. Results are in input order.

        Raises:
            InvalidMemory: an invalid item (its index named when the batch has several).
            EmbeddingError: the model failed (nothing written).
            StoreError: the store failed (the transaction rolled back: nothing written).
        """
        inputs = [i if isinstance(i, MemoryInput) else MemoryInput.from_dict(i) for i in items]
        drafts: list[NewMemory] = []
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
        texts = list(dict.fromkeys(d.content for d in drafts if self._same_hash(d) is None))
        vectors: dict[str, Vector] = {}
        if texts:
            vectors = dict(zip(texts, self.embeddings.embed(texts), strict=True))
        llm = None if self.llm is None else _Answers(self.llm)
        if llm is not None and isinstance(self.llm, BatchVerifier):
            # the pairs the model will be asked about, first in as few calls as fit its context
            recorder = _Recorder()
            for d in drafts:
                if (vec := vectors.get(d.content)) is not None:
                    self._plan(d, vec, recorder)
            llm.prefetch(recorder.pairs)
        if llm is not None:  # ask the model before the transaction: no lock held meanwhile
            for d in drafts:
                if (vec := vectors.get(d.content)) is not None:
                    self._plan(d, vec, llm)
        with self.store.transaction():
            results = [self._write_one(d, vectors.get(d.content), llm) for d in drafts]
        for r in results:
            log.debug("write %s %s sim=%s", r.decision.value, r.memory.id, r.similarity)
        return results

    def _write_one(self, draft: NewMemory, vec: Vector | None, llm: LLM | None) -> WriteResult:
        """Write one draft inside the batch's transaction; ``vec`` is ``None`` when its hash was
        stored before the transaction began."""
        existing = self._same_hash(draft)
        if existing is not None:
            plan: Plan = Keep(Decision.HASH_EXACT, existing, 1.0, "same content hash")
            return self._apply(plan, draft, vec)
        if vec is None:  # its stored twin was changed or forgotten meanwhile (another process)
            vec = self.embeddings.embed([draft.content])[0]
        return self._apply(self._plan(draft, vec, llm), draft, vec)

    def _same_hash(self, draft: NewMemory) -> Memory | None:
        """The stored memory with ``draft``'s hash among those a turn would see with it (the
        scope rule, :mod:`memlane.scope`): of its project, else a global one; a global draft:
        global ones only (a project's copy is not seen by the other projects)."""
        find = self.store.find_by_hash
        found = find(draft.owner, draft.agent, draft.content_hash, project=draft.project)
        if found is None and draft.project is not None:
            found = find(draft.owner, draft.agent, draft.content_hash)
        return found

    def _plan(self, draft: NewMemory, vec: Vector, llm: LLM | None) -> Plan:
        near = self._nearest(draft, vec)
        match, sim = (near[0][0], near[0][1]) if near else (None, None)
        return decide(draft.content, match, sim, self.settings, llm)

    def _nearest(self, draft: NewMemory, vec: Vector) -> list[tuple[Memory, float]]:
        """The nearest memories of ``draft``'s ``(owner, agent)`` that a turn would see with it
        (its project's and global ones; a global draft: global ones), nearest first.

        Several neighbours asked for, the first used: the ANN index's top 1 alone is less often
        the true nearest than the best of its top k. Other projects' memories share the
        owner's index: while they fill a whole answer, 4 times more are asked for (up to
        :data:`MAX_SCOPE_NEIGHBOURS`)."""
        k = self.settings.neighbours
        while True:
            found = self.store.nearest(draft.owner, draft.agent, vec, k)
            near = [(m, s) for m, s in found if m.project in (None, draft.project)]
            if near or len(found) < k or k >= MAX_SCOPE_NEIGHBOURS:
                return near
            k = min(k * 4, MAX_SCOPE_NEIGHBOURS)

    def _apply(self, plan: Plan, draft: NewMemory, vec: Vector | None) -> WriteResult:
        store = self.store
        if (
            isinstance(plan, Rewrite)
            and plan.text != draft.content
            and not self._valid_rewrite(plan.text, draft)
        ):
            # An LLM's merged text must obey the same rules as any memory: keep both instead.
            plan = KeepApart(
                Decision.FALLBACK_KEEP,
                plan.match,
                plan.similarity,
                "the LLM's merged text is not a valid memory; kept both",
            )
        if isinstance(plan, Add):
            memory = store.insert(draft, self._vector(vec, draft.content))
            return WriteResult(plan.decision, memory, None, plan.similarity, None)
        self._log(draft, plan)
        owner = draft.owner
        if isinstance(plan, Keep):
            kept = store.confirm(owner, plan.match.id, _provenance(draft))
            return WriteResult(plan.decision, kept, plan.match.id, plan.similarity, plan.reasoning)
        if isinstance(plan, Rewrite):
            text = plan.text
            new_vec = self._vector(vec if text == draft.content else None, text)
            reason = ChangeReason(plan.decision.value)
            store.replace_content(owner, plan.match.id, text, content_hash(text), new_vec, reason)
            # A merge keeps the higher importance of the two (the older id and created_at stay).
            higher = draft.importance if plan.decision is Decision.LLM_MERGE else None
            kept = store.confirm(owner, plan.match.id, _provenance(draft), higher)
            return WriteResult(plan.decision, kept, plan.match.id, plan.similarity, plan.reasoning)
        memory = store.insert(draft, self._vector(vec, draft.content))
        weight = round(float(plan.similarity), 4)
        if plan.supersedes:  # expired, never deleted: the new memory updates it
            store.add_association(owner, memory.id, plan.match.id, Relation.UPDATES, weight)
            store.set_status(owner, plan.match.id, Status.SUPERSEDED)
        else:
            store.add_association(owner, memory.id, plan.match.id, Relation.RELATED_TO, weight)
        return WriteResult(plan.decision, memory, plan.match.id, plan.similarity, plan.reasoning)

    def _vector(self, vec: Vector | None, text: str) -> Vector:
        return vec if vec is not None else self.embeddings.embed([text])[0]

    def _valid_rewrite(self, text: str, draft: NewMemory) -> bool:
        try:
            self.validate(MemoryInput(text, draft.type, draft.owner, draft.agent))
        except InvalidMemory:
            return False
        return True

    def _log(self, draft: NewMemory, plan: Keep | Rewrite | KeepApart) -> None:
        hash_hit = plan.decision is Decision.HASH_EXACT
        self.store.log_dedup(
            NewDedupLog(
                owner=draft.owner,
                new_text=draft.content,
                existing_id=plan.match.id,
                existing_text=plan.match.content,
                similarity=round(float(plan.similarity), 6),
                decision=plan.decision,
                reasoning=plan.reasoning,
                # A hash hit needs no review: the texts are the same memory by construction.
                review_status=ReviewStatus.CONFIRMED if hash_hit else ReviewStatus.UNREVIEWED,
            )
        )

    # ------------------------------------------------------------------ by id
    def update(self, current: Memory, content: str) -> Memory:
        """Give ``current`` (read in its caller's scope) new text: same id, the old text kept
        in its history. Raises :class:`InvalidMemory`, :class:`NotFound`."""
        draft = self.validate(MemoryInput(content, current.type, current.owner, current.agent))
        vec = self.embeddings.embed([draft.content])[0]
        with self.store.transaction():
            return self.store.replace_content(
                current.owner,
                current.id,
                draft.content,
                draft.content_hash,
                vec,
                ChangeReason.UPDATE,
            )

    def forget(self, current: Memory) -> Memory:
        """Mark ``current`` forgotten (kept on disk with its history; never searched or
        injected). Raises :class:`NotFound`."""
        if current.status is not Status.ACTIVE:
            raise NotFound(f"no memory with id {current.id!r} for owner {current.owner!r}")
        with self.store.transaction():
            return self.store.set_status(current.owner, current.id, Status.FORGOTTEN)

    def restore(self, current: Memory) -> Memory:
        """Undo :meth:`forget`: ``current`` is active again (searched and injected). Raises
        :class:`NotFound` when it is not forgotten (active, or superseded by a newer text)."""
        if current.status is not Status.FORGOTTEN:
            raise NotFound(
                f"memory {current.id!r} of {current.owner!r} is {current.status.value}, "
                "not forgotten: nothing to restore"
            )
        with self.store.transaction():
            return self.store.set_status(current.owner, current.id, Status.ACTIVE)


class _Answers:
    """The LLM's answers (or failures) of one batch, each pair asked once. :meth:`add_many` asks
    before its transaction, so the write lock is not held while a model answers; only a pair first
    met inside the transaction (against an earlier item of the same batch) is asked there."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.answers: dict[tuple[str, str], LLMVerdict | Exception] = {}

    def prefetch(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Ask about ``pairs`` in as few :meth:`BatchVerifier.verify_many` calls as
        :data:`BATCH_PAIRS` and :data:`BATCH_CHARS` allow (a single pair: one ordinary call
        later). A failed batch call leaves its pairs to be asked one by one."""
        todo = [p for p in dict.fromkeys(pairs) if p not in self.answers]
        if len(todo) < 2 or not isinstance(self.llm, BatchVerifier):
            return
        chunks: list[list[tuple[str, str]]] = [[]]
        size = 0
        for pair in todo:
            chars = len(pair[0]) + len(pair[1])
            if chunks[-1] and (len(chunks[-1]) >= BATCH_PAIRS or size + chars > BATCH_CHARS):
                chunks.append([])
                size = 0
            chunks[-1].append(pair)
            size += chars
        for chunk in chunks:
            if len(chunk) < 2:
                continue
            try:
                verdicts = self.llm.verify_many(chunk)
            except Exception:  # the batch failed: each pair is asked on its own instead
                continue
            self.answers.update(zip(chunk, verdicts, strict=True))

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict:
        key = (existing, new)
        if key not in self.answers:
            try:
                self.answers[key] = self.llm.verify_duplicate(existing, new)
            except Exception as exc:  # remembered: the pair falls back without a second wait
                self.answers[key] = exc
        answer = self.answers[key]
        if isinstance(answer, Exception):
            raise answer
        return answer


#: Gray-zone pairs asked in one call, at most, and the characters of their texts together: a
#: 4,096-token context holds ~16,000 characters at ~4 characters a token, and the prompt, the
#: answers (``[llm] max_tokens``) and a margin need the rest.
BATCH_PAIRS = 16
BATCH_CHARS = 6000


class _Recorder:
    """An LLM stand-in that notes the pairs :func:`decide` would ask about (and fails, so the
    plan it gets is discarded)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict:
        self.pairs.append((existing, new))
        raise LookupError("recording only")


def _provenance(draft: NewMemory) -> dict[str, Any]:
    out: dict[str, Any] = dict(draft.metadata)
    if draft.source:
        out["sources"] = [draft.source]
    if draft.session:
        out["sessions"] = [draft.session]
    return out


__all__: Sequence[str] = ["MemoryInput", "WritePath", "check_scope"]
