"""Hybrid search: vector + full-text (BM25) + graph, fused by reciprocal rank.

Legs (each scoped to the owner, and to the agent plus shared memories when an agent is given):

- ``vector``: nearest embeddings by cosine similarity (HNSW index, exact below 5,000 vectors);
- ``fts``: BM25 over the content words of the query (stop words removed, Porter-stemmed), any of
  them may match; the query is tokenised, never parsed, so user text is never query syntax. The
  SQLite store answers from an in-memory index (:mod:`memlane.store.text_index`);
- ``graph``: neighbours of the top fused hits along associations, ranked by relation weight times
  the seed's fused score (never seeded by substring matches);
- ``neighbour``: the memories written just before and after each of the top fused hits in the
  same session, scored ``neighbour_weight`` times that hit's fused score (docs/replay.md, "The
  recall push").

Fusion: reciprocal rank fusion, ``score = sum_leg weight_leg / (k + rank_leg)`` (Cormack, Clarke &
Buettcher, SIGIR 2009; ``k = 60`` by default). Relevance floor: a hit is dropped when its cosine to
the query is below ``max(best_cosine * floor_relative, floor_absolute)`` — relative to the best
cosine of this query, because a floor on RRF scores filters nothing. Importance and recency only
break ties (their weight is far below one rank step).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence

from memlane._ids import utcnow
from memlane._text import STOP_WORDS, words
from memlane.config import RetrievalSettings
from memlane.embeddings.cache import Embeddings
from memlane.errors import InvalidArgument
from memlane.store.base import MemoryStore
from memlane.types import Memory, MemoryType, SearchHit, Status, parse_type

MODES = ("hybrid", "vector", "fts")


def query_terms(text: str, limit: int = 32) -> list[str]:
    """Content words of ``text`` for the full-text leg (lower-case, stop words removed, unique)."""
    out: list[str] = []
    for w in words(text):
        w = w.replace("’", "'").split("'")[0]
        if len(w) < 2 or w in STOP_WORDS or w in out:
            continue
        out.append(w)
        if len(out) >= limit:
            break
    return out


class Retriever:
    """Hybrid search over one store; takes the store, the embeddings and ``[retrieval]``."""

    def __init__(
        self, store: MemoryStore, embeddings: Embeddings, settings: RetrievalSettings
    ) -> None:
        self.store = store
        self.embeddings = embeddings
        self.settings = settings

    def search(
        self,
        query: str,
        *,
        owner: str = "default",
        agent: str | None = None,
        limit: int = 10,
        types: Sequence[MemoryType | str] | None = None,
        mode: str = "hybrid",
        record_access: bool = True,
        include_inactive: bool = False,
    ) -> list[SearchHit]:
        """Search ``owner``'s memories (``agent``'s and shared ones, when given) for ``query``;
        at most ``limit`` hits, best first.

        Expired memories (``superseded``: contradicted or merged into another) are skipped
        unless ``include_inactive``: then the :data:`EXPIRED_CANDIDATES` most recent of the scope
        are ranked by cosine as one more leg (``expired``). Forgotten memories never return.

        ``mode``: ``hybrid`` (all legs), ``vector`` or ``fts`` (one leg, for baselines);
        ``record_access=False`` leaves access counts alone (injection records only what it
        injects). Raises :class:`InvalidArgument` for an empty query, a bad mode, limit or type.
        """
        return _search(
            self.store,
            self.embeddings,
            self.settings,
            query,
            owner=owner,
            agent=agent,
            limit=limit,
            types=types,
            mode=mode,
            record_access=record_access,
            include_inactive=include_inactive,
        )


#: How many of the scope's most recent expired memories ``include_inactive`` ranks (by cosine).
EXPIRED_CANDIDATES = 1000


def _search(
    store: MemoryStore,
    embeddings: Embeddings,
    cfg: RetrievalSettings,
    query: str,
    *,
    owner: str,
    agent: str | None,
    limit: int,
    types: Sequence[MemoryType | str] | None,
    mode: str,
    record_access: bool,
    include_inactive: bool = False,
) -> list[SearchHit]:
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query is empty: give some text to search for")
    if mode not in MODES:
        raise InvalidArgument(f"unknown search mode {mode!r}; valid: {', '.join(MODES)}")
    if not isinstance(limit, int) or limit < 1 or limit > 1000:
        raise InvalidArgument(f"limit must be 1..1000, got {limit!r}")
    type_set = {parse_type(t, InvalidArgument) for t in types} if types else None
    # The legs filter by type themselves; graph neighbours are filtered when read.
    n_cand = max(cfg.candidates, limit)
    qvec = embeddings.embed_query(query)

    ranks: dict[str, dict[str, int]] = {}
    cosine: dict[str, float] = {}
    if mode in ("hybrid", "vector"):
        for rank, hit in enumerate(
            store.vector_search(owner, agent, qvec, n_cand, type_set), start=1
        ):
            ranks.setdefault(hit.id, {})["vector"] = rank
            cosine[hit.id] = hit.score
    if mode in ("hybrid", "fts"):
        fts_hits = store.fts_search(owner, agent, query, n_cand, type_set)
        for rank, hit in enumerate(fts_hits, start=1):
            ranks.setdefault(hit.id, {})["fts"] = rank
    if include_inactive and mode != "fts":
        expired = store.list_memories(
            owner, agent=agent, limit=EXPIRED_CANDIDATES, status=Status.SUPERSEDED
        )
        wanted = [m.id for m in expired if type_set is None or m.type in type_set]
        sims = store.cosines(owner, wanted, qvec)
        best_first = sorted(sims, key=sims.__getitem__, reverse=True)[:n_cand]
        for rank, mid in enumerate(best_first, start=1):
            ranks.setdefault(mid, {})["expired"] = rank
            cosine[mid] = sims[mid]
    if not ranks:
        return []

    weights = {
        "vector": cfg.vector_weight,
        "fts": cfg.fts_weight,
        "graph": cfg.graph_weight,
        "expired": cfg.vector_weight,
    }
    allowed = (Status.ACTIVE, Status.SUPERSEDED) if include_inactive else (Status.ACTIVE,)

    def fused(r: dict[str, int]) -> float:
        return sum(weights.get(leg, 0.0) / (cfg.rrf_k + rank) for leg, rank in r.items())

    scores = {mid: fused(r) for mid, r in ranks.items()}
    nearby: dict[str, float] = {}
    if mode == "hybrid" and cfg.neighbour_seeds and cfg.neighbour_weight > 0:
        nearby = _neighbours_in_time(store, owner, scores, cfg)
        for rank, mid in enumerate(sorted(nearby, key=nearby.__getitem__, reverse=True), start=1):
            ranks[mid] = {"neighbour": rank}
            scores[mid] = nearby[mid]
    if mode == "hybrid" and cfg.graph_seeds and cfg.graph_weight > 0:
        seeds = sorted(scores, key=scores.__getitem__, reverse=True)[: cfg.graph_seeds]
        seed_score = {s: scores[s] for s in seeds}
        graph: dict[str, float] = {}
        for a in store.neighbours(owner, seeds):
            for seed, other in ((a.source_id, a.target_id), (a.target_id, a.source_id)):
                if seed in seed_score and other not in seed_score:
                    graph[other] = max(graph.get(other, 0.0), a.weight * seed_score[seed])
        for rank, mid in enumerate(sorted(graph, key=graph.__getitem__, reverse=True), start=1):
            ranks.setdefault(mid, {})["graph"] = rank
            scores[mid] = fused(ranks[mid]) + nearby.get(mid, 0.0)

    missing = [mid for mid in ranks if mid not in cosine]
    if missing:
        cosine.update(store.cosines(owner, missing, qvec))

    # Relevance floor relative to this query's best cosine.
    best = max(cosine.values(), default=0.0)
    floor = max(best * cfg.floor_relative, cfg.floor_absolute) if mode != "fts" else -math.inf
    now_ts = utcnow().timestamp()
    # Memories are read best fused score first, only until the hits found cannot be overtaken:
    # the tie-break adds at most cfg.tie_break (it is 0..1), so once `limit` hits score above
    # the next candidate's fused score plus that, no later candidate can enter the top `limit`.
    # Same hits, same order as reading every candidate (~100 rows at 100k memories) first.
    order = sorted(
        (mid for mid in ranks if cosine.get(mid, 0.0) >= floor),
        key=scores.__getitem__,
        reverse=True,
    )
    found: dict[str, SearchHit] = {}
    finals: list[float] = []  # min-heap of the best `limit` final scores so far
    start, step = 0, limit + 5
    while start < len(order):
        if len(finals) >= limit and scores[order[start]] + cfg.tie_break < finals[0]:
            break
        chunk = order[start : start + step]
        start += step
        step = limit
        memories = store.get_many(owner, chunk)
        for mid in chunk:
            mem = memories.get(mid)
            if mem is None or mem.status not in allowed:
                continue
            if agent is not None and mem.agent not in (None, agent):
                continue
            if type_set is not None and mem.type not in type_set:
                continue
            score = scores[mid] + cfg.tie_break * _tie_break(mem, now_ts)
            found[mid] = SearchHit(
                memory=mem, score=score, similarity=cosine.get(mid, 0.0), ranks=dict(ranks[mid])
            )
            if len(finals) < limit:
                heapq.heappush(finals, score)
            elif score > finals[0]:
                heapq.heapreplace(finals, score)
    hits = [found[mid] for mid in ranks if mid in found]  # candidate order, as before the sort
    hits.sort(key=lambda h: h.score, reverse=True)
    hits = hits[:limit]
    if record_access and hits:
        store.record_access(owner, [h.memory.id for h in hits])
    return hits


def _neighbours_in_time(
    store: MemoryStore, owner: str, scores: dict[str, float], cfg: RetrievalSettings
) -> dict[str, float]:
    """The memories written just before and just after each of the top ``neighbour_seeds``
    fused hits in the same session (a conversation's observations are written in order, and a
    question's evidence often spans adjacent turns), not already candidates: id -> score,
    ``neighbour_weight`` times the seed's fused score (the best seed's when several). Ids are
    UUIDv7, so sorting a session's ids sorts them by creation time."""
    seeds = sorted(scores, key=scores.__getitem__, reverse=True)[: cfg.neighbour_seeds]
    seed_memories = store.get_many(owner, seeds)
    sessions: dict[str, list[str]] = {}
    found: dict[str, float] = {}
    for seed in seeds:
        memory = seed_memories.get(seed)
        if memory is None or not memory.session:
            continue
        row = sessions.get(memory.session)
        if row is None:
            row = sessions[memory.session] = sorted(
                store.session_memory_ids(owner, memory.session, None)
            )
        at = bisect.bisect_left(row, seed)
        if at >= len(row) or row[at] != seed:
            continue
        for other in row[max(0, at - 1) : at] + row[at + 1 : at + 2]:
            if other not in scores:
                found[other] = max(found.get(other, 0.0), cfg.neighbour_weight * scores[seed])
    return found


def _tie_break(memory: Memory, now_ts: float) -> float:
    """0..1: half importance, half recency (half-life 30 days since the last update)."""
    age_days = max(0.0, now_ts - memory.updated_at.timestamp()) / 86400.0
    return 0.5 * memory.importance + 0.5 * math.exp(-age_days / 30.0 * math.log(2))
