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

A memory longer than ``long_words`` words weighs ``long_weight`` in the fused score of the ranked
legs and takes none of a ranked leg's places (:mod:`memlane.retrieval_long`).

Retrieval is data: a :class:`Recipe` names the ranked legs, whether the neighbour and graph legs
expand the fused list, the floor, and overrides of ``[retrieval]``; :data:`RECIPES` holds the
search modes. Each leg is one small function (``_vector_leg``, ``_fts_leg``, ``_expired_leg``,
``_graph_leg``, :func:`~memlane.retrieval_neighbours.neighbours_in_time`), then the fusion (``_rrf``) and ``_read_hits``.

Fusion: reciprocal rank fusion, ``score = sum_leg weight_leg / (k + rank_leg)`` (Cormack, Clarke &
Buettcher, SIGIR 2009; ``k = 60`` by default). Relevance floor: a hit is dropped when its cosine to
the query is below ``max(best_cosine * floor_relative, floor_absolute)`` — relative to the best
cosine of this query, because a floor on RRF scores filters nothing. Importance and recency only
break ties (their weight is far below one rank step).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane._ids import utcnow
from memlane._text import STOP_WORDS, words
from memlane.config import RetrievalSettings
from memlane.embeddings.cache import Embeddings
from memlane.errors import InvalidArgument
from memlane.retrieval_long import answered, long_memories, ranked_leg
from memlane.retrieval_neighbours import neighbours_in_time
from memlane.store.base import (
    MemoryStore,
    SearchReads,
    SearchStep,
    TextAsk,
    Vector,
    VectorAsk,
)
from memlane.store.records import ScoredId
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
        mode: str | Recipe = "hybrid",
        record_access: bool = True,
        include_inactive: bool = False,
        step: SearchStep | None = None,
        project: str | None = None,
        evidence: LegScores | None = None,
        depth: int | None = None,
    ) -> list[SearchHit]:
        """Search ``owner``'s memories (``agent``'s and shared ones, when given; ``project``'s
        and the owner's global ones, when given: :mod:`memlane.scope`) for ``query``; at most
        ``limit`` hits, best first.

        Expired memories (``superseded``: contradicted or merged into another) are skipped
        unless ``include_inactive``: then the :data:`EXPIRED_CANDIDATES` most recent of the scope
        are ranked by cosine as one more leg (``expired``). Forgotten memories never return.

        ``mode``: ``hybrid`` (all legs), ``vector`` or ``fts`` (one leg, for baselines), or a
        :class:`Recipe` (the replay's side-by-side runs);
        ``record_access=False`` leaves access counts alone (injection records only what it
        injects). ``step``: the store's search step of this scope when the caller started it
        (the injection reads its turn's context in the step's first round trip); else one is
        started here (:meth:`~memlane.store.base.MemoryStore.search_step`: a search in two round
        trips). ``evidence``: filled with each full-text hit's BM25 score and the query's best
        cosine and BM25 score (the injection's cut weighs the legs' own scores,
        :mod:`memlane.injection.cut`). ``depth``: candidates per ranked leg (default
        ``max(candidates, limit)``). Raises :class:`InvalidArgument` for an empty query, a bad
        mode, limit or type.
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
            step=step,
            project=project,
            evidence=evidence,
            depth=depth,
        )


@dataclass(slots=True)
class LegScores:
    """The legs' own scores of one search (:meth:`Retriever.search`'s ``evidence``): ``bm25``
    (memory id -> Okapi BM25 score of each full-text candidate, 0 upwards: a match on a term
    that half of the owner's memories hold scores about ln 2 = 0.69 at average length),
    ``top_bm25`` (the best of them, 0 when the leg found nothing), ``best_cosine`` (the best
    cosine of any candidate to the query, the relevance floor's reference; 0 when none), ``long``
    (the ids of the candidates of more than ``long_words`` words; empty for a leg alone),
    ``answered`` (the short hits right before a long hit in its session:
    :func:`memlane.retrieval_long.answered`)."""

    bm25: dict[str, float] = field(default_factory=dict)
    top_bm25: float = 0.0
    best_cosine: float = 0.0
    long: frozenset[str] = frozenset()
    answered: frozenset[str] = frozenset()


#: How many of the scope's most recent expired memories ``include_inactive`` ranks (by cosine).
EXPIRED_CANDIDATES = 1000


@dataclass(frozen=True, slots=True)
class Recipe:
    """A search as data (after graphiti's ``SearchConfig``): which ranked legs run, whether the
    fused list is expanded (the neighbour and graph legs, seeded by the fused hits), whether the
    relevance floor applies, and ``settings`` overrides of ``[retrieval]`` (weights, ``rrf_k``,
    ``candidates``...). The search modes are recipes (:data:`RECIPES`); the replay can run any
    recipe side by side with them (``memlane replay --recipe``)."""

    name: str
    legs: tuple[str, ...]
    expand: bool = True
    floor: bool = True
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: Whether long memories weigh ``long_weight`` (``long_words``); off for a leg alone.
    lengths: bool = True

    def retrieval(self, cfg: RetrievalSettings) -> RetrievalSettings:
        """``cfg`` with this recipe's overrides."""
        return cfg.model_copy(update=dict(self.settings)) if self.settings else cfg


def _lever(name: str, **settings: Any) -> Recipe:
    return Recipe(name, ("vector", "fts"), settings=settings)


#: Fusion levers as recipes, for ``memlane replay --recipe NAME`` (docs/replay.md, "Fusion
#: levers"): each is the hybrid recipe with some ``[retrieval]`` settings changed.
LEVERS: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("no-neighbours", ("vector", "fts"), settings={"neighbour_seeds": 0}),
        _lever("fts-5", fts_candidates=5),
        _lever("fts-7", fts_candidates=7),
        _lever("fts-cos-0.7", fts_floor_relative=0.7),
        _lever("fts-cos-0.8", fts_floor_relative=0.8),
        _lever("fts-cos-0.9", fts_floor_relative=0.9),
        _lever("fts-7-cos-0.7", fts_candidates=7, fts_floor_relative=0.7),
        _lever("fts-7-cos-0.8", fts_candidates=7, fts_floor_relative=0.8),
        _lever("fts-5-cos-0.8", fts_candidates=5, fts_floor_relative=0.8),
        _lever("long-off", long_weight=1.0),
        _lever("long-200", long_words=200),
        _lever("long-400", long_words=400),
        _lever("long-300-x0.9", long_weight=0.9),
        _lever("long-places", long_lookahead=1),
    )
}

#: The search modes as recipes: ``hybrid`` (vector + BM25, reciprocal rank fusion, expanded by
#: the neighbour and graph legs), and each ranked leg alone (the baselines).
RECIPES: dict[str, Recipe] = {
    "hybrid": Recipe("hybrid", ("vector", "fts")),
    "vector": Recipe("vector", ("vector",), expand=False, lengths=False),
    "fts": Recipe("fts", ("fts",), expand=False, floor=False, lengths=False),
}


@dataclass(slots=True)
class _Query:
    """One search's inputs, shared by the legs (``store``: the search step's reads)."""

    store: SearchReads
    cfg: RetrievalSettings
    text: str
    qvec: Vector
    owner: str
    agent: str | None
    types: set[MemoryType] | None
    depth: int
    #: That project's and global memories (``None``: every project's).
    project: str | None = None
    #: The full-text leg's BM25 scores (id -> score).
    bm25: dict[str, float] = field(default_factory=dict)
    #: How many times its places a ranked leg asks for when its first hits hold a long memory:
    #: ``long_lookahead`` when long memories take no place, else 1.
    lookahead: int = 1
    #: Memories read for their length (id -> memory), reused by the fusion and the hits.
    known: dict[str, Memory] = field(default_factory=dict)

    def leg(
        self, search: Callable[[int], list[ScoredId]], n: int
    ) -> tuple[list[ScoredId], list[str]]:
        """A ranked leg's hits (``search(k)``: its best ``k``) and its ``n`` places
        (:func:`memlane.retrieval_long.ranked_leg`)."""
        return ranked_leg(search, n, self.store, self.owner, self.known, self.lookahead,
                          self.cfg.long_words)  # fmt: skip


def _vector_leg(q: _Query, cosine: dict[str, float]) -> list[str]:
    """Nearest embeddings, best first (their cosines go to ``cosine``)."""
    hits, ids = q.leg(
        lambda k: q.store.vector_search(q.owner, q.agent, q.qvec, k, q.types, q.project), q.depth
    )
    kept = set(ids)
    for hit in hits:
        if hit.id in kept:
            cosine[hit.id] = hit.score
    return ids


def _fts_leg(q: _Query, cosine: dict[str, float]) -> list[str]:
    """BM25 over the query's content words, best first: ``fts_candidates`` of them (when set),
    only those whose cosine is at least ``fts_floor_relative`` times the vector leg's best
    (when set: their cosines are read, and go to ``cosine``)."""
    places = q.cfg.fts_candidates or q.depth
    hits, ids = q.leg(
        lambda k: q.store.fts_search(q.owner, q.agent, q.text, k, q.types, q.project), places
    )
    kept = set(ids)
    q.bm25.update((hit.id, hit.score) for hit in hits if hit.id in kept)
    if q.cfg.fts_floor_relative <= 0 or not ids:
        return ids
    sims = q.store.cosines(q.owner, [i for i in ids if i not in cosine], q.qvec)
    cosine.update(sims)
    best = max(cosine.values(), default=0.0)
    return [i for i in ids if cosine.get(i, 0.0) >= best * q.cfg.fts_floor_relative]


def _expired_leg(q: _Query, cosine: dict[str, float]) -> list[str]:
    """The :data:`EXPIRED_CANDIDATES` most recent expired memories of the scope, by cosine."""
    expired = q.store.list_memories(
        q.owner,
        agent=q.agent,
        limit=EXPIRED_CANDIDATES,
        status=Status.SUPERSEDED,
        project=q.project,
    )
    wanted = [m.id for m in expired if q.types is None or m.type in q.types]
    sims = q.store.cosines(q.owner, wanted, q.qvec)
    cosine.update(sims)
    return sorted(sims, key=sims.__getitem__, reverse=True)[: q.depth]


_LEGS: dict[str, Callable[[_Query, dict[str, float]], list[str]]] = {
    "vector": _vector_leg,
    "fts": _fts_leg,
    "expired": _expired_leg,
}


def _weights(cfg: RetrievalSettings) -> dict[str, float]:
    return {
        "vector": cfg.vector_weight,
        "fts": cfg.fts_weight,
        "graph": cfg.graph_weight,
        "expired": cfg.vector_weight,
    }


def _rrf(r: Mapping[str, int], weights: Mapping[str, float], k: float) -> float:
    """Reciprocal rank fusion of one memory's ranks: ``sum weight_leg / (k + rank_leg)``."""
    return sum(weights.get(leg, 0.0) / (k + rank) for leg, rank in r.items())


def _graph_leg(q: _Query, scores: Mapping[str, float]) -> dict[str, float]:
    """Neighbours of the top ``graph_seeds`` fused hits along associations: id -> relation
    weight times the seed's fused score (the best seed's)."""
    seeds = sorted(scores, key=scores.__getitem__, reverse=True)[: q.cfg.graph_seeds]
    seed_score = {s: scores[s] for s in seeds}
    graph: dict[str, float] = {}
    for a in q.store.neighbours(q.owner, seeds):
        for seed, other in ((a.source_id, a.target_id), (a.target_id, a.source_id)):
            if seed in seed_score and other not in seed_score:
                graph[other] = max(graph.get(other, 0.0), a.weight * seed_score[seed])
    return graph


def _by_score(scores: Mapping[str, float]) -> list[str]:
    return sorted(scores, key=scores.__getitem__, reverse=True)


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
    mode: str | Recipe,
    record_access: bool,
    include_inactive: bool = False,
    step: SearchStep | None = None,
    project: str | None = None,
    evidence: LegScores | None = None,
    depth: int | None = None,
) -> list[SearchHit]:
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query is empty: give some text to search for")
    recipe = RECIPES.get(mode) if isinstance(mode, str) else mode
    if recipe is None:
        raise InvalidArgument(f"unknown search mode {mode!r}; valid: {', '.join(MODES)}")
    if not isinstance(limit, int) or limit < 1 or limit > 1000:
        raise InvalidArgument(f"limit must be 1..1000, got {limit!r}")
    cfg = recipe.retrieval(cfg)
    type_set = {parse_type(t, InvalidArgument) for t in types} if types else None
    # The legs filter by type themselves; graph neighbours are filtered when read.
    q = _Query(
        store, cfg, query, embeddings.embed_query(query), owner, agent, type_set,
        depth or max(cfg.candidates, limit), project,
    )  # fmt: skip
    lengths = recipe.lengths and cfg.long_words > 0
    q.lookahead = cfg.long_lookahead if lengths else 1  # 1: long memories take places
    legs = list(recipe.legs)
    if include_inactive and "vector" in legs:
        legs.append("expired")
    # The ranked legs and their hits' rows in the step's second round trip (same results).
    q.store = step = step or store.search_step(owner, agent)
    fts_ask = q.cfg.fts_candidates or q.depth
    step.prepare(
        VectorAsk(owner, agent, q.qvec, q.depth if "vector" in legs else 0, type_set, project),
        TextAsk(owner, agent, query, fts_ask if "fts" in legs else 0, type_set, project),
    )
    ranks: dict[str, dict[str, int]] = {}
    cosine: dict[str, float] = {}
    for leg in legs:
        for rank, mid in enumerate(_LEGS[leg](q, cosine), start=1):
            ranks.setdefault(mid, {})[leg] = rank
    if not ranks:
        return []

    weights = _weights(cfg)
    known = q.known  # candidates read early (their length), not read again
    words = cfg.long_words if lengths else 0  # 0: no memory is long (a leg alone)
    long = long_memories(q.store, owner, known, list(ranks), words)
    factor = dict.fromkeys(long, cfg.long_weight)
    scores = {mid: _rrf(r, weights, cfg.rrf_k) * factor.get(mid, 1.0) for mid, r in ranks.items()}
    nearby: dict[str, float] = {}
    if recipe.expand and cfg.neighbour_seeds and cfg.neighbour_weight > 0:
        nearby = neighbours_in_time(q.store, owner, scores, cfg, known)
        for rank, mid in enumerate(_by_score(nearby), start=1):
            ranks[mid] = {"neighbour": rank}
            scores[mid] = nearby[mid]
    if recipe.expand and cfg.graph_seeds and cfg.graph_weight > 0:
        graph = _graph_leg(q, scores)
        for rank, mid in enumerate(_by_score(graph), start=1):
            ranks.setdefault(mid, {})["graph"] = rank
            fused = _rrf(ranks[mid], weights, cfg.rrf_k) * factor.get(mid, 1.0)
            scores[mid] = fused + nearby.get(mid, 0.0)

    missing = [mid for mid in ranks if mid not in cosine]
    if missing:
        cosine.update(q.store.cosines(owner, missing, q.qvec))
    if evidence is not None:
        evidence.bm25 = {mid: q.bm25[mid] for mid in ranks if mid in q.bm25}
        evidence.top_bm25 = max(evidence.bm25.values(), default=0.0)
        evidence.best_cosine = max(cosine.values(), default=0.0)
        # the neighbour and graph legs' hits too (read here once; the hits reuse them)
        evidence.long = long_memories(q.store, owner, known, list(ranks), words)
    allowed = (Status.ACTIVE, Status.SUPERSEDED) if include_inactive else (Status.ACTIVE,)
    hits = _read_hits(q, ranks, scores, cosine, limit, recipe.floor, allowed, known)
    if evidence is not None and evidence.long:  # among the hits: what the cut is given
        ids = [h.memory.id for h in hits]
        evidence.answered = answered(q.store, owner, known, ids, evidence.long.intersection(ids))
    if record_access and hits:
        store.record_access(owner, [h.memory.id for h in hits])
    return hits


def _read_hits(
    q: _Query,
    ranks: Mapping[str, Mapping[str, int]],
    scores: Mapping[str, float],
    cosine: Mapping[str, float],
    limit: int,
    floor_on: bool,
    allowed: tuple[Status, ...],
    known: Mapping[str, Memory],
) -> list[SearchHit]:
    """The top ``limit`` hits: the relevance floor, then memories read best fused score first
    (those in ``known`` were read already), the importance/recency tie-break added."""
    cfg, store, owner = q.cfg, q.store, q.owner
    # Relevance floor relative to this query's best cosine.
    best = max(cosine.values(), default=0.0)
    floor = max(best * cfg.floor_relative, cfg.floor_absolute) if floor_on else -math.inf
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
        unread = [mid for mid in chunk if mid not in known]
        memories = {**known, **store.get_many(owner, unread)} if unread else known
        for mid in chunk:
            mem = memories.get(mid)
            if mem is None or mem.status not in allowed:
                continue
            if q.agent is not None and mem.agent not in (None, q.agent):
                continue
            if q.project is not None and mem.project not in (None, q.project):
                continue
            if q.types is not None and mem.type not in q.types:
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
    return hits[:limit]


def _tie_break(memory: Memory, now_ts: float) -> float:
    """0..1: half importance, half recency (half-life 30 days since the last update)."""
    age_days = max(0.0, now_ts - memory.updated_at.timestamp()) / 86400.0
    return 0.5 * memory.importance + 0.5 * math.exp(-age_days / 30.0 * math.log(2))


class ModeRetriever(Retriever):
    """A retriever whose every search runs in one ``mode`` (``hybrid``, ``vector`` or ``fts``:
    a leg alone), over the same store, embeddings and settings as ``base``; the replay's
    per-leg injection figures (:meth:`memlane.MemoryEngine.injector_in_mode`)."""

    def __init__(self, base: Retriever, mode: str) -> None:
        super().__init__(base.store, base.embeddings, base.settings)
        self.mode = mode

    def search(self, query: str, **named: Any) -> list[SearchHit]:
        named["mode"] = self.mode
        return super().search(query, **named)
