"""The storage contract: what the engine (write path, retrieval, injection, janitor, review)
needs from a store, written once against it.

One implementation serves every SQL backend: :class:`memlane.store.sql.store.SQLStore`, the
domain's SQL written once over a small dialect per backend (:mod:`memlane.store.sql.dialect`:
placeholders, time / JSON / vector conversion, ``ANY`` against chunked ``IN``, the change
number) and its connections and vector leg (:mod:`memlane.store.sql.database`). Adding a backend
means a dialect, a :class:`~memlane.store.sql.database.Database` and a vector leg; another kind
of store (in memory, a service) implements this protocol and passes the shared tests.

Rules every method follows (a backend that breaks one fails the shared test suite):

**Scope.** Every method takes the ``owner`` first and never returns, changes, compares or links
a row of another owner. A memory id outside the owner's scope behaves exactly like a missing id
(``None`` from a read, :class:`~memlane.errors.NotFound` from a write): no existence leak.
In reads, ``agent=None`` means every agent of the owner, a string means that agent's memories
plus the owner's shared ones (``agent IS NULL``); ``project`` likewise: ``None`` every
project's, a string that project's memories plus the owner's global ones (``project IS NULL``,
:mod:`memlane.scope`). Dedup scope is exact: ``(owner, agent, project)`` for
:meth:`MemoryStore.find_by_hash`, ``(owner, agent)`` for :meth:`MemoryStore.nearest` (the write
path keeps the neighbours a turn of the draft's project would see).

**Transactions.** Writes happen inside :meth:`MemoryStore.transaction`: one transaction per
engine call, committed whole or rolled back whole (an exception inside the block rolls it back
and propagates). A write method called outside one raises :class:`~memlane.errors.StoreError`.
Nested ``transaction()`` blocks join the outer one. Reads inside a transaction see its writes
(read-your-writes), including :meth:`MemoryStore.nearest`; the ranked legs
(:meth:`MemoryStore.vector_search`, :meth:`MemoryStore.fts_search`) see committed rows only.
Reads outside a transaction see every committed row, including other processes' writes.

**Errors.** Driver errors never escape raw: a lock held past the busy timeout is
:class:`~memlane.errors.StoreBusy`, a read-only file :class:`~memlane.errors.ReadOnlyStore`, a
damaged file :class:`~memlane.errors.CorruptStore`, anything else
:class:`~memlane.errors.StoreError` naming the operation and the path.

**Sizes.** Calls that take many ids accept any number (backends chunk ``IN (...)`` lists).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from memlane.store.records import (
    CHUNK,
    CandidatePair,
    Candidates,
    ClusterMerge,
    NewDedupLog,
    NewMemory,
    PinnedQuery,
    ScoredId,
    SessionTurn,
    TextAsk,
    TurnContext,
    TurnQuery,
    TurnStart,
    Vector,
    VectorAsk,
)
from memlane.types import (
    Association,
    ChangeReason,
    Decision,
    DedupLogEntry,
    Memory,
    MemoryType,
    MemoryVersion,
    Relation,
    ResetReason,
    ReviewStatus,
    SessionState,
    Status,
)

__all__ = [
    "CHUNK",
    "CandidatePair",
    "Candidates",
    "ClusterMerge",
    "MemoryStore",
    "NewDedupLog",
    "NewMemory",
    "PinnedQuery",
    "ScoredId",
    "SearchReads",
    "SearchStep",
    "SessionTurn",
    "TextAsk",
    "TurnContext",
    "TurnQuery",
    "TurnStart",
    "Vector",
    "VectorAsk",
]


class SearchReads(Protocol):
    """The reads one search makes (:mod:`memlane.retrieval`): :class:`MemoryStore` has them,
    and so has a :class:`SearchStep`, which answers them from what its two round trips read
    and asks the store for the rest."""

    def vector_search(
        self,
        owner: str,
        agent: str | None,
        vector: Vector,
        k: int,
        types: Collection[MemoryType] | None = None,
        project: str | None = None,
    ) -> list[ScoredId]:
        """Top ``k`` active memories of the scope (of ``types`` only, when given; of
        ``project`` and global ones, when given) by cosine similarity to ``vector``, best
        first. The scope, project and type filters apply inside the search: other agents',
        projects' or types' memories never take the places of in-scope ones."""
        ...

    def fts_search(
        self,
        owner: str,
        agent: str | None,
        query: str,
        k: int,
        types: Collection[MemoryType] | None = None,
        project: str | None = None,
    ) -> list[ScoredId]:
        """Top ``k`` active memories of the scope (of ``types`` only, when given; of
        ``project`` and global ones, when given) by Okapi BM25
        over the content words of ``query``, best first (score: BM25, higher is better).
        ``query`` is plain text: tokenised, never parsed as query syntax, so any input is safe
        (text with no content word returns ``[]``)."""
        ...

    def get_many(self, owner: str, ids: Sequence[str]) -> dict[str, Memory]:
        """``{id: memory}`` for the ids of ``owner``'s memories among ``ids`` (any status);
        other ids are left out."""
        ...

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        """Cosine between ``vector`` and the stored embedding of each of ``owner``'s ``ids``."""
        ...

    def neighbours(self, owner: str, ids: Sequence[str]) -> list[Association]:
        """Links touching any of ``ids`` (either direction) whose both ends are ``owner``'s."""
        ...

    def session_memory_ids(self, owner: str, session: str, since: datetime | None) -> set[str]:
        """Ids of ``owner``'s active memories learned in ``session`` (created after ``since``,
        when given)."""
        ...

    def list_memories(
        self,
        owner: str,
        *,
        agent: str | None = None,
        type: MemoryType | None = None,
        limit: int = 100,
        status: Status = Status.ACTIVE,
        project: str | None = None,
    ) -> list[Memory]:
        """Memories of the scope with ``status`` (active by default; of ``type`` when given),
        newest first, at most ``limit``; with ``project``, that project's and global ones."""
        ...

    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        """Note that ``owner``'s memories were returned (``access_count``,
        ``last_accessed_at``). Buffered: flushed with the next write transaction, on close, or
        opportunistically without ever making a read wait for the write lock."""
        ...


class SearchStep(SearchReads, Protocol):
    """One search of one scope in two round trips (:meth:`MemoryStore.search_step`): the first
    (made when the step is created) catches the search caches up and reads the injection
    turn's context; :meth:`prepare` makes the second: the vector leg and the rows and
    embeddings of every hit of both legs. The search's later reads of those hits (``get_many``,
    ``cosines``, and the legs themselves when asked with the prepared arguments) are answered
    from what it read; anything else goes to the store. Results are the store's own: the same
    hits, scores and rows as asking the store directly."""

    #: The turn's context (:meth:`MemoryStore.turn_context`), or ``None`` without a turn.
    context: TurnContext | None

    def prepare(self, vector: VectorAsk, text: TextAsk) -> None:
        """The second round trip: ``vector_search(*vector)`` and ``fts_search(*text)`` (a leg
        with ``k`` 0 is not run; a leg of another scope than the step's: nothing is
        prepared) and the rows and embeddings of their hits."""
        ...


class MemoryStore(SearchReads, Protocol):
    """What the engine needs from a backend (rules in the module docstring); the reads of a
    search are :class:`SearchReads`'."""

    #: Name of the embedding model the store was built with, and its dimension.
    model: str
    dimension: int

    @property
    def store_id(self) -> str:
        """The store's stable id (``store.uuid`` in its ``meta`` table, made with the store):
        the same in every process that opens it, another for every other store."""
        ...

    def close(self) -> None:
        """Flush buffered access counts, save index caches, release the connection.
        Idempotent; any later call raises :class:`~memlane.errors.StoreError`."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction (waits up to the busy timeout for another writer, then
        :class:`~memlane.errors.StoreBusy`); nested calls join the outer one."""
        ...

    # --- memories -------------------------------------------------------------------------
    def insert(self, memory: NewMemory, embedding: Vector) -> Memory:
        """Insert a new active memory (scope: ``memory.owner``) with its ``(dimension,)``
        embedding; returns it as stored. Write: needs a transaction."""
        ...

    def get(self, owner: str, memory_id: str, *, agent: str | None = None) -> Memory | None:
        """The memory ``memory_id`` if it is ``owner``'s (and, with ``agent``, that agent's or
        shared), in any status; else ``None``."""
        ...

    def find_by_hash(
        self, owner: str, agent: str | None, content_hash: str, *, project: str | None = None
    ) -> Memory | None:
        """The oldest active memory of exactly ``(owner, agent, project)`` with
        ``content_hash`` (``project=None``: a global one)."""
        ...

    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        """Up to ``k`` active memories of exactly ``(owner, agent)``, nearest first, with their
        cosine to ``vector``. Sees rows written earlier in the current transaction."""
        ...

    def replace_content(
        self,
        owner: str,
        memory_id: str,
        content: str,
        content_hash: str,
        embedding: Vector,
        reason: ChangeReason,
    ) -> Memory:
        """New text (and embedding) for ``owner``'s memory (same id); the old text goes to its
        history with ``reason``. Raises :class:`~memlane.errors.NotFound`. Write."""
        ...

    def confirm(
        self,
        owner: str,
        memory_id: str,
        provenance: Mapping[str, Any],
        importance: float | None = None,
    ) -> Memory:
        """``confirmations += 1`` and merge ``provenance`` into metadata (lists unioned); with
        ``importance``, the memory keeps the higher of its own and that one (a merge).
        Raises :class:`~memlane.errors.NotFound`. Write."""
        ...

    def set_status(self, owner: str, memory_id: str, status: Status) -> Memory:
        """Change the status (forgotten / superseded memories stay on disk, out of every search).
        Raises :class:`~memlane.errors.NotFound`. Write."""
        ...

    def move_to_project(self, owner: str, agent: str, new_agent: str | None, project: str) -> int:
        """Give ``owner``'s global memories of exactly ``agent`` (every status) the ``project``
        and the agent ``new_agent``: the per-project agent names of older releases
        (``claude-code@<repository>``) become the project scope. Returns how many moved.
        Write, in the caller's :meth:`transaction` (the search caches see the rows again)."""
        ...

    def purge(self, owner: str, memory_ids: Sequence[str] | None = None) -> int:
        """Delete ``memory_ids`` of ``owner`` (``None``: everything of the owner) and every row
        that holds their text: history, dedup log rows quoting them, associations, session
        records; the backend then makes its files forget what it can (docs/security.md).
        Returns the memories deleted; ids of other owners are left alone. Runs its own write
        transaction (not inside another)."""
        ...

    def restore(self, memory: Memory, history: Sequence[MemoryVersion], embedding: Vector) -> None:
        """Insert ``memory`` exactly as exported (id, status, timestamps, counters) with its
        ``history`` (``memlane import`` of an export). Write."""
        ...

    def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        """Previous texts of ``owner``'s memory, oldest first. Raises
        :class:`~memlane.errors.NotFound`."""
        ...

    def add_association(
        self, owner: str, source_id: str, target_id: str, relation: Relation, weight: float
    ) -> None:
        """Link two of ``owner``'s memories (an existing link keeps the larger weight, 0..1).
        Raises :class:`~memlane.errors.NotFound` when either is not ``owner``'s. Write."""
        ...

    def associations(self, owner: str, memory_id: str) -> list[Association]:
        """Links touching ``owner``'s memory, either direction. Raises
        :class:`~memlane.errors.NotFound`."""
        ...

    def log_dedup(self, entry: NewDedupLog) -> None:
        """Append a row to the dedup log (scope: ``entry.owner``). Write."""
        ...

    def dedup_log(
        self, owner: str, *, decision: Decision | None = None, limit: int = 100
    ) -> list[DedupLogEntry]:
        """``owner``'s dedup-log rows (of ``decision`` when given), newest first."""
        ...

    def dedup_entry(self, owner: str, entry_id: int) -> DedupLogEntry | None:
        """``owner``'s dedup-log row ``entry_id`` (``None``: none, or another owner's)."""
        ...

    def pending_review(self, owner: str, *, limit: int = 100) -> list[DedupLogEntry]:
        """``owner``'s ``unreviewed`` dedup-log rows, oldest first, at most ``limit``."""
        ...

    def set_review_status(self, owner: str, entry_id: int, status: ReviewStatus) -> DedupLogEntry:
        """Record a review of ``owner``'s dedup-log row. Raises
        :class:`~memlane.errors.NotFound`. Write."""
        ...

    def candidate_pairs(
        self,
        owner: str,
        *,
        neighbours: int,
        min_similarity: float,
        max_df: int,
        progress: Callable[[int, int], None] | None = None,
    ) -> Candidates:
        """Pairs of ``owner``'s active memories of one agent scope at cosine >=
        ``min_similarity``, from two sources, never all pairs: each memory's ``neighbours``
        nearest in the vector index, and memories sharing a rare key token (a full-text term
        held by 2 to ``max_df`` active memories of the owner). ``progress(done, total)`` is
        called as memories are scanned. A read (the janitor's candidates)."""
        ...

    def merge_memories(self, owner: str, merge: ClusterMerge) -> Memory:
        """Apply one janitor merge (see :class:`ClusterMerge`); returns the survivor. Raises
        :class:`~memlane.errors.NotFound` when a member is not ``owner``'s. Write."""
        ...

    def count(self, owner: str | None = None) -> int:
        """Number of active memories of ``owner`` (of every owner with ``None``: a statistic,
        no row is returned)."""
        ...

    def counts(self, owner: str | None = None) -> list[tuple[str, str, str, int]]:
        """``(owner, type, status, n)`` per group of memories, every status (of ``owner`` when
        given; a statistic, no row is returned)."""
        ...

    def size_bytes(self) -> int:
        """Bytes the store takes on disk (SQLite: the file and its WAL; PostgreSQL: the
        database, ``pg_database_size``)."""
        ...

    # --- retrieval ------------------------------------------------------------------------
    def embeddings(self, owner: str, ids: Sequence[str]) -> dict[str, Vector]:
        """Stored ``(dimension,)`` embeddings of ``owner``'s memories among ``ids`` (any status;
        rows of the open transaction included); other ids are left out."""
        ...

    # --- sessions -------------------------------------------------------------------------
    def session(self, owner: str, session: str) -> SessionState:
        """The injection tracking of ``(owner, session)`` (turn 0 and nothing injected for a
        session never seen)."""
        ...

    def reset_session(self, owner: str, session: str, reason: ResetReason) -> SessionState:
        """Empty the session's injected ids and its turn records (:meth:`session_turns`) and
        record the reset time and ``reason``. Write: joins the open transaction, or runs in
        its own."""
        ...

    def session_turns(self, owner: str, session: str) -> list[SessionTurn]:
        """The session's turn records (:mod:`memlane.injection.turn`), by injection turn
        number then key (a few rows: they are pruned as :meth:`record_session_turn` says)."""
        ...

    def record_session_turn(
        self, owner: str, session: str, record: SessionTurn, keep_from: int
    ) -> None:
        """Record a decided turn (replacing a record of the same key: the same words decided
        again as a new turn), and drop the session's records of injection turns before
        ``keep_from`` (out of every window). Write: joins the open transaction, or runs in its
        own."""
        ...

    def learned_messages(self, owner: str, session: str) -> int:
        """How many messages of ``(owner, session)`` have been learned from (0 if none)."""
        ...

    def set_learned_messages(self, owner: str, session: str, count: int) -> None:
        """Record that the first ``count`` messages of the session have been learned from.
        Write: joins the open transaction, or runs in its own."""
        ...

    def sessions(self, owner: str, limit: int = 200) -> list[dict[str, Any]]:
        """``owner``'s sessions, most recently used first, at most ``limit``: ``session``,
        ``turn``, ``updated_at`` (ISO 8601), ``last_reset_reason`` and ``events`` (the injection
        events recorded). For the web pages; a statistic, no memory row is read."""
        ...

    def agent_counts(self) -> list[tuple[str, str | None, int]]:
        """``(owner, agent, n)``: active memories per owner and agent (``None``: shared by the
        owner's agents). A statistic for the overview page."""
        ...

    def injection_events(self, owner: str, session: str, limit: int = 50) -> list[dict[str, Any]]:
        """The session's latest injection events, newest first (``turn``, ``memory_ids``,
        ``skipped``, ``elapsed_ms``, ``created_at``)."""
        ...

    def search_step(
        self, owner: str, agent: str | None, turn: TurnQuery | None = None
    ) -> SearchStep:
        """Start one search of ``owner``'s scope (``agent``: as :meth:`vector_search`) as a
        :class:`SearchStep`: its first round trip catches the search caches up with the feed
        and, with ``turn``, reads :meth:`turn_context`'s context in the same trip. A search is
        then two round trips (plus one per session when the neighbour leg expands hits learned
        in sessions). Inside a write transaction the step reads as the store's methods do."""
        ...

    # --- an injection turn in whole steps ----------------------------------------------------
    def turn_context(
        self, owner: str, session: str, agent: str | None, pinned: PinnedQuery | None
    ) -> TurnContext:
        """The reads an injection makes before its search, as one step (one round trip where
        the backend pipelines): the session's memories since its last reset and the pinned
        memories of the scope (none for ``pinned=None``): up to ``pinned.limit``
        active memories among ``pinned.types`` (of ``pinned.project`` and global ones, when
        given), newest or most important first."""
        ...

    def start_turn(
        self, owner: str, session: str, depth: int, candidates: Sequence[str]
    ) -> TurnStart:
        """Start the session's next turn and read what the selection needs, as one step:
        increment the turn (turn 1 for a session never seen) and prune the tracking older than
        ``2 * depth`` turns (the table stays bounded), then the new state, the session's
        memories since its last reset, and the embeddings of the memories the session was shown
        within ``depth`` turns of the new one (step 5's window) and of ``candidates`` (ids not
        ``owner``'s are left out). Write: joins the open
        transaction (whose lock on the session it holds to the end: concurrent turns of one
        session select one after the other), or runs in its own. That transaction commits
        without waiting for the disk (PostgreSQL: ``synchronous_commit = off``; SQLite's
        commits never wait: docs/postgres.md "Durability of an injection turn's
        bookkeeping"): start a turn in a transaction of its own, never in one that writes
        memories."""
        ...

    def finish_turn(
        self,
        owner: str,
        session: str,
        turn: int,
        memory_ids: Sequence[str],
        event: Mapping[str, Any],
    ) -> None:
        """Record what ``turn`` injected (``memory_ids``, each at its latest turn) and an
        injection-event row (``event`` keys: ``skipped`` (reason -> count), ``elapsed_ms``;
        any other key is ignored: no text of the turn is ever stored, docs/security.md), and count an access of each of ``memory_ids`` (:meth:`record_access`), as
        one step (on PostgreSQL its writes travel with the transaction's commit). Write: joins
        the open transaction, or runs in its own."""
        ...
