"""The storage protocol. Every backend (SQLite now, PostgreSQL next) implements it with its own SQL;
the write path, retrieval and injection are written once against it.

Scoping: every call names an ``owner``; ``agent=None`` in a read means every agent of that owner,
a string means that agent's memories plus the owner's shared ones (``agent IS NULL``).
Dedup scope is exact: ``(owner, agent)``.

Writes happen inside :meth:`MemoryStore.transaction` (one transaction, rolled back whole on error).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from memlane.types import (
    Association,
    DedupLogEntry,
    Memory,
    MemoryType,
    MemoryVersion,
    Relation,
    SessionState,
    Status,
)

Vector = NDArray[np.float32]
T = TypeVar("T")


class ScoredId(NamedTuple):
    """A memory id with a leg score (cosine for vectors, -bm25 for full text)."""

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


class MemoryStore(Protocol):
    """What the engine needs from a backend."""

    model: str
    dimension: int

    def close(self) -> None: ...

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction; nested calls join the outer one."""
        ...

    # --- memories -------------------------------------------------------------------------
    def insert(self, memory: NewMemory, embedding: Vector) -> Memory: ...

    def get(self, memory_id: str) -> Memory | None: ...

    def get_many(self, ids: Sequence[str]) -> dict[str, Memory]: ...

    def find_by_hash(self, owner: str, agent: str | None, content_hash: str) -> Memory | None: ...

    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        """Active memories of exactly ``(owner, agent)``, nearest first, with exact cosines.
        Sees rows written earlier in the current transaction."""
        ...

    def replace_content(
        self, memory_id: str, content: str, content_hash: str, embedding: Vector, reason: str
    ) -> Memory:
        """New text for a memory (same id); the old text goes to its history."""
        ...

    def confirm(self, memory_id: str, provenance: Mapping[str, Any]) -> Memory:
        """``confirmations += 1`` and merge ``provenance`` into metadata (lists unioned)."""
        ...

    def set_status(self, memory_id: str, status: Status) -> Memory: ...

    def list_memories(
        self,
        owner: str,
        *,
        agent: str | None = None,
        type: MemoryType | None = None,
        limit: int = 100,
    ) -> list[Memory]: ...

    def history(self, memory_id: str) -> list[MemoryVersion]: ...

    def add_association(
        self, source_id: str, target_id: str, relation: Relation, weight: float
    ) -> None: ...

    def associations(self, memory_id: str) -> list[Association]: ...

    def log_dedup(
        self,
        *,
        owner: str,
        new_text: str,
        existing_id: str | None,
        existing_text: str | None,
        similarity: float | None,
        decision: str,
        reasoning: str | None,
        review_status: str,
    ) -> None: ...

    def dedup_log(
        self, *, owner: str | None = None, decision: str | None = None, limit: int = 100
    ) -> list[DedupLogEntry]: ...

    def count(self, owner: str | None = None) -> int: ...

    # --- retrieval ------------------------------------------------------------------------
    def vector_search(
        self,
        owner: str,
        agent: str | None,
        vector: Vector,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        """Top ``k`` active memories of ``owner`` (and of ``agent`` plus shared ones, when given;
        of ``types`` only, when given) by cosine similarity to ``vector``, best first. The scope
        and type filters apply inside the search: other agents' or types' memories never take
        the places of in-scope ones."""
        ...

    def fts_search(
        self,
        owner: str,
        agent: str | None,
        query: str,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        """Top ``k`` active memories of ``owner`` (and of ``agent`` plus shared ones, when given;
        of ``types`` only, when given) by BM25 over the content words of ``query``, best first,
        score = BM25 (higher is better). ``query`` is plain text: it is tokenised, never parsed
        as query syntax, so any input is safe (text with no content word returns ``[]``)."""
        ...

    def neighbours(self, ids: Sequence[str]) -> list[Association]:
        """Associations touching any of ``ids`` (either direction)."""
        ...

    def embeddings(self, owner: str, ids: Sequence[str]) -> dict[str, Vector]:
        """Stored unit-norm embeddings of ``ids`` (ids not found are left out)."""
        ...

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        """Cosine between ``vector`` and each stored embedding of ``ids``."""
        ...

    def record_access(self, ids: Sequence[str]) -> None:
        """Note that memories were returned (buffered; flushed without blocking the query)."""
        ...

    def pinned(
        self, owner: str, agent: str | None, types: Sequence[MemoryType], limit: int, sort: str
    ) -> list[Memory]: ...

    # --- sessions -------------------------------------------------------------------------
    def session(self, owner: str, session: str) -> SessionState: ...

    def begin_turn(self, owner: str, session: str, depth: int) -> SessionState:
        """Increment the session's turn and return the state. Tracking is pruned only once it is
        ``2 * depth`` turns old: a turn of another process that began earlier but selects later
        (its turn number is lower) still needs the entries of its own window."""
        ...

    def record_injection(
        self,
        owner: str,
        session: str,
        turn: int,
        memory_ids: Sequence[str],
        event: Mapping[str, Any],
    ) -> None: ...

    def reset_session(self, owner: str, session: str, reason: str) -> SessionState: ...

    def session_memory_ids(self, owner: str, session: str, since: datetime | None) -> set[str]:
        """Ids of memories learned in ``session`` (created after ``since`` when given)."""
        ...

    def injection_events(
        self, owner: str, session: str, limit: int = 50
    ) -> list[dict[str, Any]]: ...


def iter_chunks(seq: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """``seq`` in slices of at most ``size`` (bounded ``IN (...)`` lists)."""
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
