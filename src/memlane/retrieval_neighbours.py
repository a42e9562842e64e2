"""The neighbour leg of the hybrid search (:mod:`memlane.retrieval`): the memories written just
before and just after the top fused hits in the same session (docs/replay.md, "The recall
push"). Kept apart from the fusion so that each module stays one concern."""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from memlane.config import RetrievalSettings
from memlane.store.base import SearchReads
from memlane.types import Memory


def in_session(
    store: SearchReads, owner: str, memory: Memory | None, sessions: dict[str, list[str]]
) -> tuple[list[str], int] | None:
    """Where ``memory`` stands in its session: the ids of ``owner``'s active memories of that
    session in creation order (ids are UUIDv7, so sorting them sorts by creation time; each
    session read once into ``sessions``, session -> ids) and its index there. ``None`` for no
    memory, one without a session, or one no longer active."""
    if memory is None or not memory.session:
        return None
    row = sessions.get(memory.session)
    if row is None:
        row = sessions[memory.session] = sorted(
            store.session_memory_ids(owner, memory.session, None)
        )
    at = bisect.bisect_left(row, memory.id)
    return (row, at) if at < len(row) and row[at] == memory.id else None


def neighbours_in_time(
    store: SearchReads,
    owner: str,
    scores: dict[str, float],
    cfg: RetrievalSettings,
    known: Mapping[str, Memory],
) -> dict[str, float]:
    """The memories written just before and just after each of the top ``neighbour_seeds``
    fused hits in the same session (a conversation's observations are written in order, and a
    question's evidence often spans adjacent turns), not already candidates: id -> score,
    ``neighbour_weight`` times the seed's fused score (the best seed's when several). Ids are
    UUIDv7, so sorting a session's ids sorts them by creation time. Seeds in ``known`` (read by
    the fusion already) are not read again."""
    seeds = sorted(scores, key=scores.__getitem__, reverse=True)[: cfg.neighbour_seeds]
    unread = [seed for seed in seeds if seed not in known]  # ``known``: read by the fusion
    seed_memories = {**known, **store.get_many(owner, unread)} if unread else known
    sessions: dict[str, list[str]] = {}
    found: dict[str, float] = {}
    for seed in seeds:
        memory = seed_memories.get(seed)
        place = in_session(store, owner, memory, sessions)
        if place is None:
            continue
        row, at = place
        for other in row[max(0, at - 1) : at] + row[at + 1 : at + 2]:
            if other not in scores:
                found[other] = max(found.get(other, 0.0), cfg.neighbour_weight * scores[seed])
    return found
