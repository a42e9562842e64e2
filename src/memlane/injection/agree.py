"""How two near memories relate, for injection: the write path's guard decides (step 5).

The injection's near-duplicate filter used to drop any candidate whose cosine to a memory shown
within the window exceeded ``semantic_threshold``. With the default model the cosine cannot tell
"Alice currently works at Acme" from "Acme works at Alice", "Priya is 34" from "Priya is 35", or
"Tom eats meat" from "Tom does not eat meat" (all above 0.85), while the write path keeps each of
those pairs apart (its guard, :func:`memlane.dedup.guard.compare`). So above the threshold the
guard decides here too (:func:`relate`):

- ``same``: the guard's ``same``, ``extends`` or ``narrows``, or a paraphrase (``different``
  words, no two shared words trading places around a third: :func:`_swapped`; "Alice works at
  Acme" / "Alice is employed by Acme"): one of the two is enough, the other is a semantic
  duplicate, as before;
- ``update``: the same content words with only a number changed ("Priya is 34 years old." /
  "Priya is 35 years old.") or only a negation added or dropped ("Tom eats meat on weekends." /
  "Tom does not eat meat on weekends."): the newer is shown with what it replaced and both
  dates (:func:`update_note`), never the older alone;
- ``distinct``: anything else the guard refuses: swapped roles (``reordered``, or shared words
  in another order), numbers added, dropped or changed with other words, a negation with other
  words. Both may be injected: neither hides the other.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from memlane.dedup.guard import GuardVerdict, TextAnalyses, compare
from memlane.store.base import MemoryStore, Vector
from memlane.types import Memory

__all__ = ["Agreement", "NearPairs", "Verdict", "newer", "relate", "update_note"]

Agreement = Literal["same", "update", "distinct"]

#: Negation markers as :func:`memlane.dedup.guard.content_words` gives them (the guard's list).
_NEGATIONS = frozenset(
    {"not", "no", "never", "without", "none", "nobody", "nothing", "neither", "nor"}
)

_SAME = frozenset({GuardVerdict.SAME, GuardVerdict.EXTENDS, GuardVerdict.NARROWS})


def _swapped(a: list[str], b: list[str]) -> bool:
    """Two content words both texts have trade places around a third they share: ``x ... v
    ... y`` in one, ``y ... v ... x`` in the other ("Alice works at Acme" / "Acme works at
    Alice"). Moving a phrase to the front ("In every editor, Alice likes dark mode") moves
    words past each other but not around a shared word that stays between them."""
    pos_a = {w: i for i, w in reversed(list(enumerate(a)))}
    pos_b = {w: i for i, w in reversed(list(enumerate(b)))}
    shared = [w for w in pos_a if w in pos_b]
    for x in shared:
        for y in shared:
            if not (pos_a[x] < pos_a[y] and pos_b[y] < pos_b[x]):
                continue
            for v in shared:
                between_a = pos_a[x] < pos_a[v] < pos_a[y]
                if between_a and pos_b[y] < pos_b[v] < pos_b[x]:
                    return True
    return False


#: The guard's analyses of the texts :func:`relate` compares (tokens, content words, numbers),
#: kept per text (at most 4,096 texts, then it starts again: the guard's own bound).
_TEXTS = TextAnalyses(limit=4096)

#: How many pairs of texts :func:`_related` remembers (a pair holds references to two texts
#: already in memory elsewhere; at most a few MB even for long texts).
RELATED_PAIRS = 8192


def relate(a: str, b: str) -> Agreement:
    """How texts ``a`` and ``b`` (already near by cosine) relate: see the module docstring.
    Symmetric in what it returns; about 0.1 ms a pair (the guard's comparison)."""
    verdict = compare(a, b, _TEXTS).verdict
    if verdict in _SAME:
        return "same"
    # content_words() and numbers() of each text, from its analysis kept in _TEXTS (the same
    # lists: both are that analysis's fields, computed again at every call otherwise)
    seen_a, seen_b = _TEXTS.analysis(a), _TEXTS.analysis(b)
    words_a, words_b = list(seen_a.content), list(seen_b.content)
    if verdict is GuardVerdict.NUMBERS_DIFFER:
        same_shape = len(seen_a.numbers) == len(seen_b.numbers)
        return "update" if words_a == words_b and same_shape else "distinct"
    if verdict is GuardVerdict.NEGATION_DIFFERS:
        plain_a = [w for w in words_a if w not in _NEGATIONS]
        plain_b = [w for w in words_b if w not in _NEGATIONS]
        same_numbers = seen_a.numbers == seen_b.numbers
        return "update" if plain_a == plain_b and same_numbers else "distinct"
    if verdict is GuardVerdict.DIFFERENT and not _swapped(words_a, words_b):
        return "same"
    return "distinct"


@functools.lru_cache(maxsize=RELATED_PAIRS)
def _related(a: str, b: str) -> Agreement:
    """:func:`relate` of ``a <= b``, remembered: it is a pure function of the two texts, and
    the same pairs come back turn after turn (a session's window against its candidates; a
    near pair is judged from both sides within a turn). Measured at 10,000 memories (bench
    inject, CPU profile): the guard's comparisons were the largest cost of step 5."""
    return relate(a, b)


def newer(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    """``(newer, older)`` of two memories by ``created_at`` (on a tie, ``b`` is the newer: the
    later write of a batch)."""
    return (a, b) if a.created_at > b.created_at else (b, a)


def _changed_words(old: str, new: str) -> list[str]:
    """The words of ``old`` that ``new`` changed, as written (``3pm``, ``$1,200``, ``v1.2``;
    end punctuation dropped), when both have the same number of words and only some differ:
    what an ``update`` note shows before, not the bare number (``before: 3`` of 3pm -> 4pm).
    Empty when the words do not line up (the caller falls back to the numbers)."""
    a, b = old.split(), new.split()
    if len(a) != len(b):
        return []
    return [x.rstrip(".,;:!?") for x, y in zip(a, b, strict=True) if x != y]


def update_note(new: Memory, old: Memory) -> str:
    """What the block adds after the newer memory of an ``update`` pair: ``"(since
    2026-11-25; before: 34, as of 2026-11-20)"`` when only numbers changed (the older
    numbers that differ), ``"(since ...; before: <the older text>, as of ...)"`` for a
    negation. Dates are the memories' ``created_at`` (UTC days)."""
    # the numbers of each text's analysis kept in _TEXTS (numbers() analyses the text again:
    # ~0.1 ms a text, twice for each update pair a turn meets)
    old_numbers = list(_TEXTS.analysis(old.content).numbers)
    new_numbers = list(_TEXTS.analysis(new.content).numbers)
    if len(old_numbers) == len(new_numbers) and old_numbers != new_numbers:
        changed = [o for o, n in zip(old_numbers, new_numbers, strict=True) if o != n]
        before = ", ".join(_changed_words(old.content, new.content) or changed)
    else:
        before = " ".join(old.content.split()).rstrip(".")
    since, then = new.created_at.date().isoformat(), old.created_at.date().isoformat()
    return f"(since {since}; before: {before}, as of {then})"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :meth:`NearPairs.judge` says of one candidate: ``skip`` (a reason for
    ``Injection.skipped``), or show ``show`` (``None``: the candidate itself) with ``note`` after
    it, ``folded`` being the older memory of the pair that the note stands for."""

    skip: str | None = None
    show: Memory | None = None
    note: str | None = None
    folded: Memory | None = None


class NearPairs:
    """Step 5's semantic buffer for one turn: the memories shown (within the window, or chosen
    for this block) and the candidate pool, their vectors, and the guard's word on each pair
    above ``threshold`` (cosine). Window memories' texts are read from ``store`` only for pairs
    above the threshold.

    Each candidate's cosines with every vector of the turn are one matrix-vector product; of
    them only the few ids above the threshold are kept, and :meth:`judge` looks at nothing else
    (most candidates have none: no guard call, no list walked). Before, two walks of the
    window's ids and of the pool per candidate cost ~1.1 ms a turn of 19 candidates at 93,641
    memories (wall time of ``judge`` less the guard's, loaded machine). One matrix-matrix
    product for all candidates is no faster: OpenBLAS runs one that size on every core, 30 ms
    when the cores are busy (measured on this 2-core machine at load 8)."""

    def __init__(
        self,
        store: MemoryStore,
        owner: str,
        threshold: float,
        vectors: Mapping[str, Vector],
        window: Iterable[str],
    ) -> None:
        self.store = store
        self.owner = owner
        self.threshold = threshold
        self.vectors = vectors
        # in the order shown (a window id may come twice: judge reads them in this order)
        self._shown = [mid for mid in window if mid in vectors]
        self._shown_set = set(self._shown)
        self._order = list(vectors)  # row -> id
        self._matrix: np.ndarray[Any, Any] | None = None
        self._pool: dict[str, Memory] = {}
        self._texts: dict[str, Memory | None] = {}
        self._near: dict[str, frozenset[str]] = {}  # candidate id -> ids above the threshold

    @staticmethod
    def relate(a: str, b: str) -> Agreement:
        """:func:`relate` of two texts, remembered across turns (:func:`_related`)."""
        return _related(a, b) if a <= b else _related(b, a)

    def add_pool(self, memories: Iterable[Memory]) -> None:
        """The candidates of this turn (their texts are known without a read)."""
        for m in memories:
            self._pool.setdefault(m.id, m)
            self._texts[m.id] = m

    def shown(self, memory_id: str) -> None:
        """``memory_id`` is in this block: later candidates are compared with it."""
        if memory_id in self.vectors:
            self._shown.append(memory_id)
            self._shown_set.add(memory_id)

    def _near_of(self, memory_id: str) -> frozenset[str]:
        """The ids of the turn's vectors whose cosine with ``memory_id``'s (one of them) is
        above the threshold, ``memory_id`` left out (unit vectors: cosines are dot products)."""
        found = self._near.get(memory_id)
        if found is None:
            if self._matrix is None:  # one copy of the turn's vectors (concatenated: np.stack
                # adds an axis to each of ~200 arrays first, 2.5x slower here)
                rows = list(self.vectors.values())
                self._matrix = np.concatenate(rows).reshape(len(rows), -1)
            near = (self._matrix @ self.vectors[memory_id] > self.threshold).nonzero()[0]
            order = self._order
            found = frozenset([order[r] for r in near.tolist() if order[r] != memory_id])
            self._near[memory_id] = found
        return found

    def _memories(self, ids: Sequence[str]) -> list[Memory | None]:
        missing = [i for i in ids if i not in self._texts]
        if missing:
            found = self.store.get_many(self.owner, missing)
            for i in missing:
                self._texts[i] = found.get(i)
        return [self._texts[i] for i in ids]

    def judge(self, memory: Memory, same_session: set[str], chosen: set[str]) -> Verdict:
        """The guard's word on ``memory`` against what was shown and the rest of the pool
        (``same_session``: learned this session, never shown; ``chosen``: in this block)."""
        if memory.id not in self.vectors:
            return Verdict()
        near = self._near_of(memory.id)
        if not near:  # most candidates: no pair above the threshold
            return Verdict()
        earlier: Memory | None = None
        near_shown: list[str] = []
        if not near.isdisjoint(self._shown_set):  # in the order shown
            near_shown = [i for i in self._shown if i in near]
        for other, mid in zip(self._memories(near_shown), near_shown, strict=True):
            if other is None:  # gone from the store since it was shown: the old rule
                return Verdict(skip="semantic_duplicate")
            agreement = self.relate(other.content, memory.content)
            if agreement == "same":
                return Verdict(skip="semantic_duplicate")
            if agreement == "update":
                if newer(other, memory)[0] is other:
                    return Verdict(skip="superseded")
                earlier = other if mid not in chosen else earlier
        partners = [
            p
            for p in (self._pool[i] for i in self._pool if i in near and i not in chosen)
            if self.relate(p.content, memory.content) == "update"
        ]
        if partners:
            newest = max([memory, *partners], key=lambda m: m.created_at)
            if newest is not memory:
                if newest.id in same_session:
                    return Verdict(skip="superseded")
                return Verdict(show=newest, note=update_note(newest, memory), folded=memory)
            earlier = max(partners, key=lambda m: m.created_at)
        if earlier is not None:
            return Verdict(note=update_note(memory, earlier), folded=earlier)
        return Verdict()
