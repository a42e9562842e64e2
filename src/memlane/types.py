"""Pure values: memories, write results, search hits, injections.

All are frozen dataclasses; identity and persistence live in the store. ``to_dict()`` gives the
one JSON shape of each (datetimes ISO 8601 with their ``+00:00`` offset, enums as values), used
by every door: the CLI's ``--json``, the HTTP API (pydantic serialises these types through
``to_dict``), the MCP server and the hook client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class MemoryType(StrEnum):
    """What kind of thing a memory is; each type has a default importance."""

    IDENTITY = "identity"
    GOAL = "goal"
    DECISION = "decision"
    TODO = "todo"
    PREFERENCE = "preference"
    FACT = "fact"
    EVENT = "event"
    OBSERVATION = "observation"


#: The type names in order, for messages: "identity, goal, decision, ...".
TYPE_NAMES = ", ".join(t.value for t in MemoryType)

#: Default importance (0..1) of each type, from the design's data model.
DEFAULT_IMPORTANCE: Mapping[MemoryType, float] = {
    MemoryType.IDENTITY: 1.0,
    MemoryType.GOAL: 0.9,
    MemoryType.DECISION: 0.8,
    MemoryType.TODO: 0.8,
    MemoryType.PREFERENCE: 0.7,
    MemoryType.FACT: 0.6,
    MemoryType.EVENT: 0.4,
    MemoryType.OBSERVATION: 0.3,
}


class Status(StrEnum):
    ACTIVE = "active"
    FORGOTTEN = "forgotten"
    SUPERSEDED = "superseded"


class Relation(StrEnum):
    """Typed association between two memories."""

    RELATED_TO = "related_to"
    UPDATES = "updates"
    CONTRADICTS = "contradicts"
    CAUSED_BY = "caused_by"
    RESULT_OF = "result_of"
    PART_OF = "part_of"
    #: A review decided these two stay apart (a reversed merge or rejection, a confirmed keep):
    #: the janitor never merges them (:func:`memlane.dedup.review.kept_apart`).
    KEPT_APART = "kept_apart"


class Decision(StrEnum):
    """The write path's decision for one offered memory (see docs/dedup.md)."""

    ADDED = "added"
    HASH_EXACT = "hash_exact"
    AUTO_REJECT = "auto_reject"
    REPLACED = "replaced"
    GRAY_KEEP = "gray_keep"
    GUARD_KEEP = "guard_keep"
    LLM_MERGE = "llm_merge"
    LLM_REJECT = "llm_reject"
    LLM_KEEP = "llm_keep"
    FALLBACK_REJECT = "fallback_reject"
    FALLBACK_KEEP = "fallback_keep"
    #: The janitor merged this memory into ``existing_id`` (a cluster, after the fact).
    JANITOR_MERGE = "janitor_merge"

    @property
    def duplicate(self) -> bool:
        """True when the offered text did not become a memory of its own."""
        return self in _DUPLICATE_DECISIONS


_DUPLICATE_DECISIONS = frozenset(
    {
        Decision.HASH_EXACT,
        Decision.AUTO_REJECT,
        Decision.REPLACED,
        Decision.LLM_MERGE,
        Decision.LLM_REJECT,
        Decision.FALLBACK_REJECT,
        Decision.JANITOR_MERGE,
    }
)


class ReviewStatus(StrEnum):
    """Where a ``dedup_log`` row stands in review: ``hash_exact`` rows are confirmed when
    written; the others wait for a person (or the LLM janitor) to confirm or reverse them."""

    UNREVIEWED = "unreviewed"
    CONFIRMED = "confirmed"
    REVERSED = "reversed"


class ChangeReason(StrEnum):
    """Why a memory's text changed (the reason kept with the previous text in its history)."""

    UPDATE = "update"
    REPLACED = "replaced"
    LLM_MERGE = "llm_merge"
    #: The janitor merged a cluster into this memory (each member's text kept in history).
    JANITOR_MERGE = "janitor_merge"


class PinnedSort(StrEnum):
    """Order of pinned ("ambient") memories: newest first, or most important first."""

    RECENT = "recent"
    IMPORTANCE = "importance"


class ResetReason(StrEnum):
    """Why a session's injection tracking was reset."""

    COMPACT = "compact"
    CLEAR = "clear"
    RESUME = "resume"


#: Field names of each dataclass :func:`_jsonable` has met (``dataclasses.fields`` costs more
#: than the copy itself: an injection of 7 items took 0.70 ms to serialise without this).
#: ``None`` for the other types met (looked up once per type, not once per value).
_FIELDS: dict[type, tuple[str, ...] | None] = {}
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    try:
        names = _FIELDS[kind]
    except KeyError:
        is_data = dataclasses.is_dataclass(value) and not isinstance(value, type)
        names = tuple(f.name for f in dataclasses.fields(value)) if is_data else None
        _FIELDS[kind] = names
    if names is not None:
        return {name: _jsonable(getattr(value, name)) for name in names}
    if kind is datetime:
        return value.isoformat()
    if kind is dict:  # before the Mapping ABC's slower isinstance
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _as_dict(value: _ToDict) -> dict[str, Any]:
    """``value.to_dict()`` (the subclass's own, e.g. :class:`WriteResult`'s ``duplicate``)."""
    return value.to_dict()


def parse_type(value: MemoryType | str, error: type[Exception] = ValueError) -> MemoryType:
    """``value`` as a :class:`MemoryType`; else ``error`` with a message naming the valid types."""
    try:
        return MemoryType(value)
    except ValueError:
        raise error(f"unknown type {value!r}; valid types: {TYPE_NAMES}") from None


class _ToDict:
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (datetimes as ISO 8601 strings, enums as their values)."""
        out = _jsonable(self)
        assert isinstance(out, dict)
        return out

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """pydantic's schema of the dataclass (validation and the OpenAPI schema unchanged),
        serialised to JSON through :meth:`to_dict`: the HTTP API answers what the CLI prints
        (pydantic's own form would write UTC as ``Z``). pydantic is imported only when a model
        using these types is built (the server), never by importing this module."""
        from pydantic_core import core_schema

        schema = handler(source)
        schema["serialization"] = core_schema.plain_serializer_function_ser_schema(
            _as_dict, when_used="json"
        )
        return schema


@dataclass(frozen=True, slots=True)
class Memory(_ToDict):
    """One stored memory. Times are timezone-aware UTC; ``importance`` is 0..1."""

    id: str
    content: str
    type: MemoryType
    importance: float
    owner: str
    agent: str | None
    session: str | None
    source: str | None
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None
    access_count: int
    confirmations: int
    content_hash: str
    status: Status
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: When the memory stopped being true (``superseded`` by a newer one); ``None`` while valid.
    valid_to: datetime | None = None
    #: The project the memory belongs to (a repository's identity, :mod:`memlane.scope`);
    #: ``None``: global to its owner (seen in every project).
    project: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryVersion(_ToDict):
    """A previous text of a memory, kept when its text changed (replace, merge, update)."""

    memory_id: str
    version: int
    content: str
    content_hash: str
    reason: ChangeReason
    replaced_at: datetime


@dataclass(frozen=True, slots=True)
class Association(_ToDict):
    """A typed, weighted (0..1) link between two memories of the same owner."""

    source_id: str
    target_id: str
    relation: Relation
    weight: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class WriteResult(_ToDict):
    """Outcome of offering one memory to the write path.

    ``memory`` is the memory that now holds the text (the new one, or the existing one that
    absorbed it); ``matched_id`` the existing memory it was compared with (``None`` for ``added``
    with nothing near); ``similarity`` the cosine to it (1.0 for ``hash_exact``).
    """

    decision: Decision
    memory: Memory
    matched_id: str | None = None
    similarity: float | None = None
    reasoning: str | None = None

    @property
    def duplicate(self) -> bool:
        return self.decision.duplicate

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (datetimes as ISO 8601, enums as values) with ``duplicate``: the one form
        of a write's outcome, shared by the CLI's ``--json``, the HTTP API and the MCP server."""
        return {**_ToDict.to_dict(self), "duplicate": self.duplicate}


@dataclass(frozen=True, slots=True)
class DedupLogEntry(_ToDict):
    """One row of ``dedup_log``: every decision at or above ``gray_low`` (and every hash hit)."""

    id: int
    owner: str
    new_text: str
    existing_id: str | None
    existing_text: str | None
    similarity: float | None
    decision: Decision
    reasoning: str | None
    review_status: ReviewStatus
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SearchHit(_ToDict):
    """One search result.

    ``score`` is the fused reciprocal-rank score (higher is better); ``similarity`` the cosine
    between the query and the memory embeddings; ``ranks`` the 1-based rank in each leg that found
    it (keys among ``vector``, ``fts``, ``graph``).
    """

    memory: Memory
    score: float
    similarity: float
    ranks: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InjectedItem(_ToDict):
    """A memory placed in an injection block; ``source`` is ``pinned`` or ``contextual``."""

    memory: Memory
    source: str
    score: float


@dataclass(frozen=True, slots=True)
class Injection(_ToDict):
    """What :meth:`MemoryEngine.inject` decided for one turn.

    ``block`` is the text to insert before the user message (``None`` when nothing is injected);
    ``skipped`` counts candidates left out, by reason (``trivial``, ``disabled``,
    ``already_injected``, ``duplicate_in_batch``, ``semantic_duplicate``, ``same_session``,
    ``budget``, ``superseded``: the older of a changed value whose newer one was shown); of two
    memories that differ only in a value, ``block`` shows the newer with the older's value and
    dates (docs/injection.md, step 5); ``elapsed_ms`` is wall time in milliseconds.
    """

    session: str
    turn: int
    block: str | None
    items: tuple[InjectedItem, ...]
    skipped: Mapping[str, int]
    elapsed_ms: float


@dataclass(frozen=True, slots=True)
class SessionState(_ToDict):
    """Persisted injection tracking of one session (see docs/injection.md).

    ``injected`` maps memory id -> the turn it was last injected in (pruned to the window);
    ``last_reset_at``/``last_reset_reason`` record the last compaction, clear or resume.
    """

    owner: str
    session: str
    turn: int
    injected: Mapping[str, int]
    last_reset_at: datetime | None
    last_reset_reason: str | None
    updated_at: datetime | None


@dataclass(frozen=True, slots=True)
class TurnBlock(_ToDict):
    """An earlier turn's block as :meth:`MemoryEngine.turn` gives it back to a door whose text
    is not kept (``kept=False``): the turn's ``key`` digest, its conversation ``position``
    (``None`` when the door gave none) and its ``block``, rendered the same bytes on every call
    while its memories stay as they are."""

    key: str
    position: int | None
    block: str


@dataclass(frozen=True, slots=True)
class Turn(_ToDict):
    """What :meth:`MemoryEngine.turn` answers for one model call (:mod:`memlane.injection.turn`).

    ``key``: the turn's digest; ``repeat``: the turn was already decided (a tool loop's later
    call, a retry): the same ``block``, nothing recorded, no search; ``block``: this turn's
    block (the same text on every call of the turn; ``None``: nothing to inject); ``items``:
    its memories in block order; ``injection``: the engine's decision on the turn's first call
    (``None`` on a repeat); ``earlier``: for ``kept=False`` only, the earlier turns' blocks
    whose memories are still within the window, oldest first (no memory in two of them nor in
    ``block``); ``reset``: ``"compact"`` when this call found the history shorter than recorded
    and reset the session.
    """

    key: str
    repeat: bool
    block: str | None
    items: tuple[InjectedItem, ...]
    injection: Injection | None
    earlier: tuple[TurnBlock, ...] = ()
    reset: str | None = None
