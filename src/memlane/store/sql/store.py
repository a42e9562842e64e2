"""The one SQL implementation of :class:`~memlane.store.base.MemoryStore`: the parts of
:mod:`memlane.store.sql` composed over a backend's :class:`~memlane.store.sql.database.Database`
and :class:`~memlane.store.sql.database.VectorLeg`. A backend's ``open`` builds those two and
this class; nothing here knows which backend it runs on.

Search legs: vectors by the backend's leg (SQLite: the in-process ANN cache; PostgreSQL: HNSW in
SQL); full text by the backend-neutral BM25 cache (:mod:`memlane.store.text_index`), caught up
from the change feed (:mod:`.feed`) before every search, so both backends rank text the same.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from memlane._ids import new_id
from memlane.errors import EmbeddingMismatch
from memlane.store.base import (
    Candidates,
    ClusterMerge,
    NewDedupLog,
    NewMemory,
    PinnedQuery,
    ScoredId,
    TurnContext,
    TurnStart,
    Vector,
)
from memlane.store.candidates import candidate_pairs
from memlane.store.index_cache import PERSIST_MIN_ROWS, IndexCache
from memlane.store.sql.database import Database, VectorLeg
from memlane.store.sql.errors import translating
from memlane.store.sql.feed import SQLFeed
from memlane.store.sql.links import Links
from memlane.store.sql.maintenance import merge_memories
from memlane.store.sql.memories import Memories
from memlane.store.sql.purge import purge, restore
from memlane.store.sql.sessions import Sessions
from memlane.store.sql.turns import Turns
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


@translating
class SQLStore:
    """A :class:`~memlane.store.base.MemoryStore` over SQL. Thread-safe as far as its
    :class:`Database` is (SQLite: one connection behind a lock; PostgreSQL: a pool).

    ``make_leg(db, cache, memories)``: the backend's vector leg (it may use the cache);
    ``cache_folder``: where the search caches are saved on close (``None``: never).
    """

    def __init__(
        self,
        db: Database,
        make_leg: Callable[[Database, IndexCache, Memories], VectorLeg],
        *,
        model: str,
        dimension: int,
        cache_folder: Path | None = None,
    ) -> None:
        self._db = db
        self.model = model
        self.dimension = dimension
        self._store_uuid = ""
        self._closed = False
        self._memories = Memories(db)
        self._cache = IndexCache(
            SQLFeed(db, self._memories, lambda: self._store_uuid), dimension, cache_folder
        )
        self._vectors = make_leg(db, self._cache, self._memories)
        self._memories.vectors = self._vectors
        self._sessions = Sessions(db)
        self._links = Links(db, self._memories)
        self._turns = Turns(db, self._sessions, self._memories)

    @property
    def where(self) -> str:
        """The store's location, for messages (a path, or the server without its password)."""
        return self._db.where

    @property
    def db(self) -> Database:
        """The backend's connections (for the backend's own tools and tests)."""
        return self._db

    @property
    def cache(self) -> IndexCache:
        """The search caches (per-owner ANN and BM25 indexes)."""
        return self._cache

    # ------------------------------------------------------------------ open / close
    def check_model(self) -> None:
        """Record the model of a new store, or raise :class:`EmbeddingMismatch` when the store
        was built with another model or dimension (read first: a replica cannot write)."""
        with self._db.read() as q:
            meta: dict[str, str] = {k: v for k, v in q.all("SELECT key, value FROM meta")}
        if "store.uuid" not in meta:  # a new store
            with self._db.transaction(), self._db.write() as q:
                q.many(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                    [
                        ("embedding.model", self.model),
                        ("embedding.dimension", str(self.dimension)),
                        ("store.uuid", new_id()),
                    ],
                )
                meta = {k: v for k, v in q.all("SELECT key, value FROM meta")}
        if (
            meta["embedding.model"] != self.model
            or int(meta["embedding.dimension"]) != self.dimension
        ):
            raise EmbeddingMismatch(
                f"{self.where} was built with embedding model {meta['embedding.model']!r} "
                f"({meta['embedding.dimension']} dims) but is being opened with {self.model!r} "
                f"({self.dimension} dims). Open it with the same [embedding] settings, or switch "
                f"it to the new model with `memlane reembed --model {self.model}`."
            )
        self._store_uuid = meta["store.uuid"]

    def close(self) -> None:
        """Flush buffered access counts, save large search indexes, release the connections.
        Idempotent; any later call raises :class:`~memlane.errors.StoreError`."""
        if self._closed:
            return
        try:
            self._db.flush_access(force=True)
            with self._db.cache_lock():
                self._cache.save(PERSIST_MIN_ROWS)
        finally:
            self._closed = True
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._db.transaction():
            yield

    # ------------------------------------------------------------------ memories
    def insert(self, memory: NewMemory, embedding: Vector) -> Memory:
        return self._memories.insert(memory, embedding)

    def get(self, owner: str, memory_id: str, *, agent: str | None = None) -> Memory | None:
        return self._memories.get(owner, memory_id, agent)

    def get_many(self, owner: str, ids: Sequence[str]) -> dict[str, Memory]:
        return self._memories.get_many(owner, ids)

    def find_by_hash(self, owner: str, agent: str | None, content_hash: str) -> Memory | None:
        return self._memories.find_by_hash(owner, agent, content_hash)

    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        return self._memories.nearest(owner, agent, vector, k)

    def replace_content(
        self,
        owner: str,
        memory_id: str,
        content: str,
        content_hash: str,
        embedding: Vector,
        reason: ChangeReason,
    ) -> Memory:
        return self._memories.replace_content(
            owner, memory_id, content, content_hash, embedding, reason
        )

    def confirm(
        self,
        owner: str,
        memory_id: str,
        provenance: Mapping[str, Any],
        importance: float | None = None,
    ) -> Memory:
        return self._memories.confirm(owner, memory_id, provenance, importance)

    def set_status(self, owner: str, memory_id: str, status: Status) -> Memory:
        return self._memories.set_status(owner, memory_id, status)

    def list_memories(
        self,
        owner: str,
        *,
        agent: str | None = None,
        type: MemoryType | None = None,
        limit: int = 100,
        status: Status = Status.ACTIVE,
    ) -> list[Memory]:
        return self._memories.list_memories(owner, agent, type, limit, status)

    def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        return self._memories.history(owner, memory_id)

    def count(self, owner: str | None = None) -> int:
        return self._memories.count(owner)

    def counts(self, owner: str | None = None) -> list[tuple[str, str, str, int]]:
        return self._memories.counts(owner)

    def size_bytes(self) -> int:
        return self._db.size_bytes()

    def agent_counts(self) -> list[tuple[str, str | None, int]]:
        return self._memories.agent_counts()

    def purge(self, owner: str, memory_ids: Sequence[str] | None = None) -> int:
        return purge(self._db, self._cache, owner, memory_ids)

    def restore(self, memory: Memory, history: Sequence[MemoryVersion], embedding: Vector) -> None:
        restore(self._db, self._memories, memory, history, embedding)

    # ------------------------------------------------------------------ links, dedup log
    def add_association(
        self, owner: str, source_id: str, target_id: str, relation: Relation, weight: float
    ) -> None:
        self._links.add_association(owner, source_id, target_id, relation, weight)

    def associations(self, owner: str, memory_id: str) -> list[Association]:
        return self._links.associations(owner, memory_id)

    def neighbours(self, owner: str, ids: Sequence[str]) -> list[Association]:
        return self._links.neighbours(owner, ids)

    def log_dedup(self, entry: NewDedupLog) -> None:
        self._links.log_dedup(entry)

    def dedup_log(
        self, owner: str, *, decision: Decision | None = None, limit: int = 100
    ) -> list[DedupLogEntry]:
        return self._links.dedup_log(owner, decision, limit)

    def dedup_entry(self, owner: str, entry_id: int) -> DedupLogEntry | None:
        return self._links.dedup_entry(owner, entry_id)

    def pending_review(self, owner: str, *, limit: int = 100) -> list[DedupLogEntry]:
        return self._links.pending_review(owner, limit)

    def set_review_status(self, owner: str, entry_id: int, status: ReviewStatus) -> DedupLogEntry:
        return self._links.set_review_status(owner, entry_id, status)

    # ------------------------------------------------------------------ janitor
    def candidate_pairs(
        self,
        owner: str,
        *,
        neighbours: int,
        min_similarity: float,
        max_df: int,
        progress: Callable[[int, int], None] | None = None,
    ) -> Candidates:
        with self._db.cache_lock():
            return candidate_pairs(
                self._cache,
                owner,
                neighbours=neighbours,
                min_similarity=min_similarity,
                max_df=max_df,
                progress=progress,
            )

    def merge_memories(self, owner: str, merge: ClusterMerge) -> Memory:
        return merge_memories(self._db, self._memories, self._links, owner, merge)

    # ------------------------------------------------------------------ retrieval
    def vector_search(
        self,
        owner: str,
        agent: str | None,
        vector: Vector,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        if k <= 0:
            return []
        return self._vectors.search(owner, agent, vector, k, types)

    def fts_search(
        self,
        owner: str,
        agent: str | None,
        query: str,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        with self._db.cache_lock():
            return self._cache.fts_search(owner, agent, query, k, types)

    def embeddings(self, owner: str, ids: Sequence[str]) -> dict[str, Vector]:
        return self._memories.embeddings(owner, ids)

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        return {mid: float(vec @ vector) for mid, vec in self.embeddings(owner, ids).items()}

    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        self._db.record_access(owner, ids)

    # ------------------------------------------------------------------ sessions
    def session(self, owner: str, session: str) -> SessionState:
        return self._sessions.session(owner, session)

    def reset_session(self, owner: str, session: str, reason: ResetReason) -> SessionState:
        return self._sessions.reset_session(owner, session, reason)

    def learned_messages(self, owner: str, session: str) -> int:
        return self._sessions.learned_messages(owner, session)

    def set_learned_messages(self, owner: str, session: str, count: int) -> None:
        self._sessions.set_learned_messages(owner, session, count)

    def session_memory_ids(self, owner: str, session: str, since: datetime | None) -> set[str]:
        with self._db.read() as q:
            return self._memories.session_ids(q, owner, session, since)

    def sessions(self, owner: str, limit: int = 200) -> list[dict[str, Any]]:
        return self._sessions.sessions(owner, limit)

    def injection_events(self, owner: str, session: str, limit: int = 50) -> list[dict[str, Any]]:
        return self._sessions.injection_events(owner, session, limit)

    # ------------------------------------------------------------------ a turn in whole steps
    def turn_context(
        self, owner: str, session: str, agent: str | None, pinned: PinnedQuery | None
    ) -> TurnContext:
        return self._turns.context(owner, session, agent, pinned)

    def start_turn(
        self, owner: str, session: str, depth: int, candidates: Sequence[str]
    ) -> TurnStart:
        with self._db.transaction():
            return self._turns.start(owner, session, depth, candidates)

    def finish_turn(
        self,
        owner: str,
        session: str,
        turn: int,
        memory_ids: Sequence[str],
        event: Mapping[str, Any],
    ) -> None:
        with self._db.transaction():
            self._turns.finish(owner, session, turn, memory_ids, event)
