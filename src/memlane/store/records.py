"""The values the store contract (:mod:`memlane.store.base`) passes in and out besides the
public types of :mod:`memlane.types`: rows to write, the janitor's pairs and merges, an
injection turn's steps, and the chunk size of id lists."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from memlane.types import (
    ChangeReason,
    Decision,
    Memory,
    MemoryType,
    PinnedSort,
    ReviewStatus,
    SessionState,
    Status,
)

#: Unit-norm float32 embeddings: shape ``(dimension,)`` for one, ``(n, dimension)`` for a batch.
Vector = NDArray[np.float32]

#: Ids per ``IN (...)`` list: below SQLite's default limit of 999 bound parameters (twice over, for
#: queries that repeat the list) and PostgreSQL's 65,535.
CHUNK = 400


class ScoredId(NamedTuple):
    """A memory id with a leg score (cosine for vectors, BM25 for full text; higher is better)."""

    id: str
    score: float


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A validated memory ready to insert (the store assigns nothing but its row)."""

    id: str
    content: str
    content_hash: str
    type: MemoryType
    importance: float
    owner: str
    agent: str | None
    session: str | None
    source: str | None
    created_at: datetime
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: The memory's project (``None``: global to its owner).
    project: str | None = None


@dataclass(frozen=True, slots=True)
class NewDedupLog:
    """One ``dedup_log`` row to write (see :class:`~memlane.types.DedupLogEntry`)."""

    owner: str
    new_text: str
    existing_id: str | None
    existing_text: str | None
    similarity: float | None
    decision: Decision
    reasoning: str | None
    review_status: ReviewStatus = ReviewStatus.UNREVIEWED


@dataclass(frozen=True, slots=True)
class CandidatePair:
    """Two active memories of one ``(owner, agent, project)`` scope whose embeddings are close:
    ids ``a`` and ``b`` (``a`` the older row), their cosine, and where the pair came from
    (``"vector"``: nearest neighbours in the ANN index; ``"tokens"``: a shared rare key token)."""

    a: str
    b: str
    similarity: float
    source: str


@dataclass(frozen=True, slots=True)
class Candidates:
    """What :meth:`MemoryStore.candidate_pairs` found for one owner: ``pairs`` at or above the
    similarity asked for; ``considered``: distinct pairs whose cosine was computed (the work
    done, never all ``n * (n - 1) / 2``); ``memories``: active memories scanned."""

    pairs: list[CandidatePair]
    considered: int
    memories: int
    #: Pairs found by each source before the similarity filter (``vector``, ``tokens``).
    by_source: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterMerge:
    """One janitor merge (:meth:`MemoryStore.merge_memories`): the ``survivor`` takes
    ``content`` (its old text, when it changes, and every absorbed member's text go to its
    history with ``reason``) and the given importance, ``created_at``, confirmations and metadata;
    every id of ``absorbed`` becomes ``superseded`` (``valid_to`` set, ``merged_into`` the
    survivor in its metadata) and its associations move to the survivor."""

    survivor: str
    absorbed: Sequence[str]
    content: str
    content_hash: str
    embedding: Vector
    importance: float
    created_at: datetime
    confirmations: int
    metadata: Mapping[str, Any]
    reason: ChangeReason


class PinnedQuery(NamedTuple):
    """Which pinned memories a turn shows (:meth:`MemoryStore.pinned`'s arguments)."""

    types: Sequence[MemoryType]
    limit: int
    sort: PinnedSort
    #: That project's and the owner's global memories (``None``: every project's).
    project: str | None = None


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What an injection reads before its search (:meth:`MemoryStore.turn_context`): the ids
    of the session's memories learned since its last reset (``same_session``) and the
    ``pinned`` memories asked for. Not the session's state: the turn reads it again, current,
    when it starts (:class:`TurnStart`), and nothing used the copy read before the search (a
    ~200-row read of the session's tracking a turn, for nothing)."""

    same_session: set[str]
    pinned: list[Memory]


@dataclass(frozen=True, slots=True)
class TurnQuery:
    """An injection turn's reads that travel with its search's first step
    (:meth:`MemoryStore.search_step`): the ``session`` and the ``pinned`` memories asked for
    (``None``: none), as :meth:`MemoryStore.turn_context` takes them."""

    session: str
    pinned: PinnedQuery | None = None


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What :meth:`MemoryStore.start_turn` returns: the session's ``state`` with the new turn,
    ``same_session`` (as :class:`TurnContext`'s, read again in the transaction), and
    ``vectors``: the ``(dimension,)`` embeddings of the memories the session was shown within
    the window (``depth`` turns up to the new one) and of the candidates asked for."""

    state: SessionState
    same_session: set[str]
    vectors: dict[str, Vector]


class VectorAsk(NamedTuple):
    """One vector search: :meth:`~memlane.store.base.MemoryStore.vector_search`'s arguments."""

    owner: str
    agent: str | None
    vector: Vector
    k: int
    types: Collection[MemoryType] | None = None
    #: That project's and global memories (``None``: every project's).
    project: str | None = None


class TextAsk(NamedTuple):
    """One BM25 search: :meth:`~memlane.store.base.MemoryStore.fts_search`'s arguments."""

    owner: str
    agent: str | None
    query: str
    k: int
    types: Collection[MemoryType] | None = None
    #: That project's and global memories (``None``: every project's).
    project: str | None = None


class PairsAsk(NamedTuple):
    """One owner's candidate search: :meth:`~memlane.store.base.MemoryStore.candidate_pairs`'s
    keyword arguments (their meaning is written there)."""

    neighbours: int
    min_similarity: float
    max_df: int
    progress: Callable[[int, int], None] | None = None


class TurnRecord(NamedTuple):
    """What one injection turn recorded: :meth:`~memlane.store.base.MemoryStore.finish_turn`'s
    arguments after the owner (their meaning is written there)."""

    session: str
    turn: int
    memory_ids: Sequence[str]
    event: Mapping[str, Any]


class MemoryFilter(NamedTuple):
    """Which memories a listing returns: :meth:`~memlane.store.base.MemoryStore.list_memories`'s
    keyword arguments (their meaning is written there)."""

    agent: str | None = None
    type: MemoryType | None = None
    limit: int = 100
    status: Status = Status.ACTIVE
    project: str | None = None


class ContentChange(NamedTuple):
    """A memory's new text: :meth:`~memlane.store.base.MemoryStore.replace_content`'s arguments
    after the owner (their meaning is written there)."""

    memory_id: str
    content: str
    content_hash: str
    embedding: Vector
    reason: ChangeReason


class Confirmation(NamedTuple):
    """A memory seen again: :meth:`~memlane.store.base.MemoryStore.confirm`'s arguments after
    the owner (their meaning is written there)."""

    memory_id: str
    provenance: Mapping[str, Any]
    importance: float | None = None


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """One decided turn of the turn model (:mod:`memlane.injection.turn`), as the store keeps
    it: ``key`` (a digest, never the prompt's text), the conversation ``position`` the door gave
    (``None``: unknown), the session's injection ``turn`` number it was decided at, and its
    block's memories in block order as ``(memory id, "pinned" | "contextual", folded id or
    None, rank score)`` (the folded id: the older memory of an update pair whose value the
    line's note gives)."""

    key: str
    position: int | None
    turn: int
    items: tuple[tuple[str, str, str | None, float], ...]
