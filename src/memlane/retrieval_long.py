"""Long memories in the hybrid search (:mod:`memlane.retrieval`): a memory of more than
``[retrieval] long_words`` words (a chat's long assistant answers stored as memories) weighs
``long_weight`` in the fusion, takes none of a ranked leg's places, and the injection's cut asks
more of it (:mod:`memlane.injection.cut`), and lets in the short message right before it in
its session (the message it answers) when that one is a candidate too. Its vector reads only the embedding model's first
window, which is near any question of the chat, and its many words match any question: on BEAM
100K chats 1-10 the long answers filled the legs and pushed out the short messages that hold
most of the evidence (docs/replay.md, "Injection precision"). Kept apart from the fusion so that
each module stays one concern."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memlane.retrieval_neighbours import in_session
from memlane.store.base import SearchReads
from memlane.store.records import ScoredId
from memlane.types import Memory


def is_long(memory: Memory, n: int) -> bool:
    """Whether ``memory`` holds more than ``n`` words (``n`` 0: never). Splits at most ``n``
    times, so a long memory (BEAM answers reach 25,000 words) costs no more than a short one;
    a text of at most ``n`` characters cannot hold more than ``n`` words."""
    return 0 < n < len(memory.content) and len(memory.content.split(maxsplit=n)) > n


def _read(store: SearchReads, owner: str, known: dict[str, Memory], ids: Sequence[str]) -> None:
    unread = [mid for mid in ids if mid not in known]
    if unread:  # a search step answers these from its second round trip, which read the rows
        known.update(store.get_many(owner, unread))


def leg_places(
    store: SearchReads,
    owner: str,
    known: dict[str, Memory],
    ids: list[str],
    places: int,
    lookahead: int,
    long_words: int,
) -> list[str]:
    """A ranked leg's candidates from its hits ``ids`` (best first; ``places`` times
    ``lookahead`` of them were asked for): the first ``places`` when ``lookahead`` is 1, else
    the hits up to the ``places``-th short one, the long ones ranked among them included. A leg
    of short memories only gets exactly its first ``places``. The memories read for their
    length go to ``known`` (id -> memory), which the rest of the search reuses."""
    if lookahead <= 1:
        return ids[:places]
    _read(store, owner, known, ids)
    kept: list[str] = []
    short = 0
    for mid in ids:
        if short >= places:
            break
        kept.append(mid)
        memory = known.get(mid)
        short += memory is None or not is_long(memory, long_words)
    return kept


def ranked_leg(
    search: Callable[[int], list[ScoredId]],
    n: int,
    store: SearchReads,
    owner: str,
    known: dict[str, Memory],
    lookahead: int,
    long_words: int,
) -> tuple[list[ScoredId], list[str]]:
    """A ranked leg's hits (``search(k)``: its best ``k``, best first) and its ``n`` places
    (:func:`leg_places`). It asks for ``n``, what the search step prepared; only when those
    hold a long memory does it ask again, for ``lookahead`` times ``n``. So a store without
    long memories costs what it did before long memories took no place (LoCoMo dev, the
    replay's search: a deeper ask on every search cost ~0.6 ms p50, ~3 ms p95)."""
    hits = search(n)
    ids = [hit.id for hit in hits]
    if lookahead > 1 and long_memories(store, owner, known, ids, long_words):
        hits = search(n * lookahead)
        ids = [hit.id for hit in hits]
    return hits, leg_places(store, owner, known, ids, n, lookahead, long_words)


def long_memories(
    store: SearchReads, owner: str, known: dict[str, Memory], ids: Sequence[str], long_words: int
) -> frozenset[str]:
    """The candidates ``ids`` of more than ``long_words`` words (0: none, and nothing read).
    Reads those not in ``known`` into it; the neighbour leg and the hits reuse them (reading
    them again, even from the search step, cost 4.6 ms p50 a search on the BEAM 1-10 store,
    0.2 ms this way)."""
    if long_words <= 0:
        return frozenset()
    _read(store, owner, known, ids)
    return frozenset(
        mid for mid in ids if (memory := known.get(mid)) is not None and is_long(memory, long_words)
    )


def answered(
    store: SearchReads,
    owner: str,
    known: dict[str, Memory],
    candidates: Sequence[str],
    long: frozenset[str],
) -> frozenset[str]:
    """The short ``candidates`` that come right before a ``long`` candidate in its session: in
    a chat stored message by message, the message that a long answer answers. The answer's
    vector reads only its start, which takes up that message, and its many words match the
    question; so its being a candidate is evidence for the message before it, which says the
    same in far fewer words (the injection's cut lets it in: :mod:`memlane.injection.cut`).
    One read of each session that holds a long candidate (none without long candidates:
    :func:`memlane.retrieval_neighbours.in_session`)."""
    pool = set(candidates)
    found: set[str] = set()
    sessions: dict[str, list[str]] = {}
    for mid in long:
        place = in_session(store, owner, known.get(mid), sessions)
        before = place[0][place[1] - 1] if place and place[1] > 0 else None
        if before in pool and before not in long:
            found.add(before)
    return frozenset(found)
