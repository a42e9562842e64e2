"""The ``[retrieval]`` and ``[injection]`` sections of :class:`memlane.config.Settings`: how a
search ranks (docs/retrieval.md) and what is injected before each turn (docs/injection.md). Kept
apart from :mod:`memlane.config`, which holds the store, model and write-path sections and the
loading; both are importable from there.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

from memlane.embeddings.profiles import MINILM
from memlane.types import TYPE_NAMES, MemoryType

_TYPE_VALUES = frozenset(t.value for t in MemoryType)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class RetrievalSettings(_Section):
    """``[retrieval]``: hybrid search. See docs/retrieval.md."""

    #: Reciprocal rank fusion constant k in 1/(k + rank) (Cormack et al. 2009 use 60).
    rrf_k: float = Field(default=60.0, gt=0)
    #: Candidates taken from each leg before fusion (at least the requested limit). Kept small:
    #: with k = 60, deep candidates let items ranked ~40th by both legs outrank the top hit of
    #: one leg. LoCoMo dev, evidence recall@10 (docs/replay.md): 50 -> 0.606, 10 -> 0.632.
    candidates: int = Field(default=10, ge=1, le=1000)
    #: Candidates of the full-text leg when not 0 (else ``candidates``): fewer BM25 candidates
    #: than vector ones (docs/replay.md, "Fusion levers").
    fts_candidates: int = Field(default=0, ge=0, le=1000)
    #: A full-text hit joins the fusion only when its cosine to the query is at least this times
    #: the best cosine of the vector leg (0 = every hit): BM25 matches on words a long, generic
    #: text happens to contain (docs/replay.md, "Fusion levers").
    fts_floor_relative: float = Field(default=0.0, ge=0, le=1)
    #: A memory of more than ``long_words`` words (0 = none) weighs ``long_weight`` in the fused
    #: score of the ranked legs: it outruns the model's 256-token window (its vector reads only
    #: its start) and its many words match any question (BM25). Long assistant answers stored
    #: as memories were most of hybrid's misses on BEAM. BEAM 100K chats 1-5 / 6-10, recall@10:
    #: off 0.575 / 0.564, on 0.622 / 0.588 (vector alone 0.577 / 0.569); LoCoMo unchanged (no
    #: memory is that long). docs/replay.md, "Fusion levers".
    long_words: int = Field(default=300, ge=0)
    long_weight: float = Field(default=0.5, ge=0, le=1)
    #: Such a memory takes none of a ranked leg's ``candidates`` places: a leg whose first hits
    #: hold one asks for this many times its places and keeps its hits until ``candidates``
    #: short ones are in (1 = long memories take places, as before). BEAM chats 1-10, block
    #: recall at 3 / 5 / 8: 0.623 / 0.628 / 0.629; docs/replay.md, "BEAM, third look".
    long_lookahead: int = Field(default=5, ge=1, le=20)
    #: Weights of the legs in the fused score.
    vector_weight: float = Field(default=1.0, ge=0)
    fts_weight: float = Field(default=1.0, ge=0)
    #: 0 by default since the neighbour leg: LoCoMo dev recall@10, tune / check split, graph 0.5
    #: 0.6346 / 0.6347, graph off 0.6393 / 0.6412 (docs/replay.md, "The recall push").
    graph_weight: float = Field(default=0.0, ge=0)
    #: Top fused hits whose associations seed the graph leg.
    graph_seeds: int = Field(default=5, ge=0, le=100)
    #: Top fused hits whose neighbours in time (the memory written just before and just after,
    #: same session) join the results at ``neighbour_weight`` times the hit's fused score; 0 = off.
    #: LoCoMo dev (docs/replay.md, "The recall push"): tuned on conversations 0-3, checked on 4-6.
    neighbour_seeds: int = Field(default=3, ge=0, le=100)
    neighbour_weight: float = Field(default=0.47, ge=0, le=1)
    #: Relevance floor: drop hits with cosine < max(best_cosine * floor_relative, floor_absolute)
    #: (default: the active model's profile; these: all-MiniLM-L6-v2).
    floor_relative: float = Field(default=MINILM.floor_relative, ge=0, le=1)
    floor_absolute: float = Field(default=MINILM.floor_absolute, ge=-1, le=1)
    #: Weight of the importance/recency tie-break (kept far below one RRF rank step).
    tie_break: float = Field(default=1e-4, ge=0, le=0.01)


class InjectionSettings(_Section):
    """``[injection]`` (and ``[agents.<name>.injection]``): what is injected before each turn."""

    enabled: bool = True
    search_limit: int = Field(default=20, ge=1, le=500)
    max_total: int = Field(default=25, ge=1, le=500)
    #: Optional budget in tokens (estimated at 4 characters per token); 0 = no token budget.
    max_tokens: int = Field(default=0, ge=0)
    #: Default: the active model's profile (this one: all-MiniLM-L6-v2).
    semantic_threshold: float = Field(default=MINILM.semantic_threshold, ge=0, le=1)
    context_window_depth: int = Field(default=10, ge=1, le=10_000)
    ambient_enabled: bool = False
    #: NoDecode: ``MEMLANE_INJECTION__PINNED_TYPES=identity,goal`` reaches the validator as is.
    pinned_types: Annotated[tuple[MemoryType, ...], NoDecode] = ()
    pinned_limit: int = Field(default=3, ge=0, le=100)
    pinned_sort: Literal["recent", "importance"] = "recent"
    max_injected_blocks_in_history: int = Field(default=3, ge=0, le=100)
    #: Prompts shorter than this many characters are trivial (no search).
    min_chars: int = Field(default=8, ge=0)
    #: Recent exchanges folded into the query (the newest first); each clipped to this many chars.
    recent_chars: int = Field(default=300, ge=0)
    #: Enrich the query with ``recent`` only when the text has fewer content words than this
    #: (0 = never enrich; a large number = always).
    enrich_below_words: int = Field(default=4, ge=0)
    #: The cut (docs/injection.md, "The cut"): a hit only one leg found enters the block only
    #: with strong evidence of its own (false: the top ``search_limit`` hits, as before).
    cut: bool = True
    #: Candidates per search leg (before: search_limit's 20; deeper lists fuse worse).
    search_candidates: int = Field(default=10, ge=1, le=1000)
    #: A hit only the vector leg found: its cosine within this of the query's best (the profile).
    cut_cosine_gap: float = Field(default=MINILM.cut_cosine_gap, ge=0, le=2)
    #: A hit only BM25 found: score >= this x the query's best BM25 and >= ``cut_bm25_floor``
    #: (0.69 = ln 2: one match of a word that half of the owner's memories hold).
    cut_bm25_relative: float = Field(default=0.55, ge=0, le=1)
    cut_bm25_floor: float = Field(default=0.69, ge=0)
    #: A hit both legs found: cosine within this of the best (the profile), or BM25 >= the next.
    cut_both_cosine_gap: float = Field(default=MINILM.cut_both_cosine_gap, ge=0, le=2)
    cut_both_bm25_relative: float = Field(default=0.45, ge=0, le=1)
    #: A long hit (over ``[retrieval] long_words`` words) that a rule above keeps must also be
    #: the best cosine or hold BM25 >= this x the best (docs/replay.md, "BEAM, third look";
    #: 1 = only the best BM25 or cosine).
    cut_long_bm25_relative: float = Field(default=0.9, ge=0, le=1)
    #: A short hit cut above enters when the memory right after it in its session is a long
    #: candidate (the message that long answer answers; docs/injection.md, "The cut").
    cut_answered: bool = True

    @field_validator("pinned_types", mode="before")
    @classmethod
    def _types(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().startswith("["):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError('not a JSON list; write identity,goal or ["identity"]') from None
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        for item in value or ():
            if item not in _TYPE_VALUES:
                raise ValueError(f"unknown memory type {item!r}; valid types: {TYPE_NAMES}")
        return value
