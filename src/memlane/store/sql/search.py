"""The store's searches, written once for every backend: the vector leg (the backend's
:class:`~memlane.store.sql.database.VectorLeg`), BM25 over the backend-neutral text index
(:mod:`memlane.store.text_index`, caught up from the change feed before every search, so both
backends rank text the same), cosines against stored embeddings, and the janitor's candidate
pairs. Contracts: :meth:`~memlane.store.base.MemoryStore.vector_search` and the methods beside
it in :mod:`memlane.store.base`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlane.store.base import Candidates, ScoredId, TurnQuery, Vector
from memlane.store.candidates import candidate_pairs
from memlane.store.index_cache import IndexCache
from memlane.store.records import PairsAsk, TextAsk, VectorAsk
from memlane.store.sql.database import Database, VectorLeg
from memlane.store.sql.feed import SQLFeed
from memlane.store.sql.links import Links
from memlane.store.sql.memories import Memories
from memlane.store.sql.step import SQLSearchStep
from memlane.store.sql.turns import Turns


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

    # The legs take the contract's arguments (MemoryStore.vector_search / fts_search, where
    # their signatures and meaning are written) as the records VectorAsk / TextAsk.
    def vector_search(self, /, *ask: Any, **named: Any) -> list[ScoredId]:
        query = VectorAsk(*ask, **named)
        return self.vectors.search(query) if query.k > 0 else []

    def fts_search(self, /, *ask: Any, **named: Any) -> list[ScoredId]:
        query = TextAsk(*ask, **named)
        with self.db.cache_lock():
            return self.cache.fts_search(query)

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        return {mid: float(v @ vector) for mid, v in self.memories.embeddings(owner, ids).items()}

    def candidate_pairs(self, /, owner: str, **options: Any) -> Candidates:
        """:func:`~memlane.store.candidates.candidate_pairs` under the cache lock; ``options``:
        the contract's keyword arguments, as the record :class:`PairsAsk`."""
        with self.db.cache_lock():
            return candidate_pairs(self.cache, owner, PairsAsk(**options))
