"""The store's searches, written once for every backend: the vector leg (the backend's
:class:`~memlane.store.sql.database.VectorLeg`), BM25 over the backend-neutral text index
(:mod:`memlane.store.text_index`, caught up from the change feed before every search, so both
backends rank text the same), cosines against stored embeddings, and the janitor's candidate
pairs. Contracts: :meth:`~memlane.store.base.MemoryStore.vector_search` and the methods beside
it in :mod:`memlane.store.base`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from memlane.store.base import Candidates, ScoredId, TurnQuery, Vector
from memlane.store.candidates import candidate_pairs
from memlane.store.index_cache import IndexCache
from memlane.store.sql.database import Database, VectorLeg
from memlane.store.sql.feed import SQLFeed
from memlane.store.sql.links import Links
from memlane.store.sql.memories import Memories
from memlane.store.sql.step import SQLSearchStep
from memlane.store.sql.turns import Turns
from memlane.types import MemoryType


class Search:
    """Searches over one :class:`Database`, its search caches and its vector leg."""

    def __init__(
        self,
        db: Database,
        cache: IndexCache,
        feed: SQLFeed,
        vectors: VectorLeg,
        parts: tuple[Memories, Links, Turns],
    ) -> None:
        self.db = db
        self.cache = cache
        self.feed = feed
        self.vectors = vectors
        self.in_process = vectors.in_process
        self.memories, self.links, self.turns = parts

    def search_step(
        self, owner: str, agent: str | None, turn: TurnQuery | None = None
    ) -> SQLSearchStep:
        return SQLSearchStep(self, owner, agent, turn)

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
        return self.vectors.search(owner, agent, vector, k, types)

    def fts_search(
        self,
        owner: str,
        agent: str | None,
        query: str,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        with self.db.cache_lock():
            return self.cache.fts_search(owner, agent, query, k, types)

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        return {mid: float(v @ vector) for mid, v in self.memories.embeddings(owner, ids).items()}

    def candidate_pairs(
        self,
        owner: str,
        *,
        neighbours: int,
        min_similarity: float,
        max_df: int,
        progress: Callable[[int, int], None] | None = None,
    ) -> Candidates:
        with self.db.cache_lock():
            return candidate_pairs(
                self.cache,
                owner,
                neighbours=neighbours,
                min_similarity=min_similarity,
                max_df=max_df,
                progress=progress,
            )
