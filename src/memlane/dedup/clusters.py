"""The janitor's clusters and its guard rule (:mod:`memlane.dedup.janitor`, step 2 and the
model-free part of step 3): union-find over candidate pairs, and which members of a cluster the
near-identical guard lets merge without a model."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TypeVar

from memlane.dedup.guard import (
    GuardVerdict,
    TextAnalyses,
    compare,
    compound_variant,
    may_pass,
    squashed,
)
from memlane.store.base import CandidatePair
from memlane.types import Memory

__all__ = ["GuardTable", "clusters_of", "judge", "passes", "passing_pairs"]

#: Guard verdicts under which two members may be merged without a model.
_PASS = frozenset({GuardVerdict.SAME, GuardVerdict.EXTENDS, GuardVerdict.NARROWS})
#: ... and under which a member's text holds everything the other's does.
_HOLDS = frozenset({GuardVerdict.SAME, GuardVerdict.EXTENDS})

T = TypeVar("T", bound=Hashable)


def _components(edges: Sequence[tuple[T, T]]) -> list[list[T]]:
    """Union-find over ``edges``: the connected groups of their ends, each in first-seen order."""
    parent: dict[T, T] = {}

    def find(x: T) -> T:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra
    groups: dict[T, list[T]] = {}
    for x in parent:
        groups.setdefault(find(x), []).append(x)
    return list(groups.values())


def clusters_of(pairs: Sequence[CandidatePair]) -> list[tuple[list[str], float]]:
    """Union-find over ``pairs``: each connected group of ids (in first-seen order) with the
    highest cosine among its pairs, largest groups first."""
    best: dict[str, float] = {}
    for p in pairs:
        best[p.a] = max(best.get(p.a, 0.0), p.similarity)
    out = [
        (ids, max(best.get(i, 0.0) for i in ids))
        for ids in _components([(p.a, p.b) for p in pairs])
    ]
    out.sort(key=lambda g: (-len(g[0]), g[0][0]))
    return out


def judge(a: str, b: str, memo: TextAnalyses | None = None) -> tuple[GuardVerdict | None, str]:
    """The near-identical guard on two texts, for merging without a model: the passing verdict
    (same, extends or narrows; a compound variant counts as same) or ``(None, why)``. The cheap
    :func:`~memlane.dedup.guard.may_pass` is asked before :func:`compare`; a compound variant
    needs equal :func:`~memlane.dedup.guard.squashed` forms (a compound written apart or joined
    keeps its letters). ``memo``: see :class:`~memlane.dedup.guard.TextAnalyses`."""
    compound = squashed(a, memo) == squashed(b, memo)
    if not compound and not may_pass(a, b, memo):
        return None, "content words differ"
    result = compare(a, b, memo)
    if result.verdict in _PASS:
        return result.verdict, ""
    if compound and compound_variant(a, b):
        return GuardVerdict.SAME, ""
    return None, result.reason


def passes(a: str, b: str, memo: TextAnalyses | None = None) -> bool:
    """Two texts may be merged without a model (the near-identical guard, either order)."""
    return judge(a, b, memo)[0] is not None


def passing_pairs(pairs: Sequence[CandidatePair], texts: Mapping[str, str]) -> list[CandidatePair]:
    """The ``pairs`` whose texts (``texts[id]``) pass the near-identical guard (:func:`passes`),
    in their order, each text analysed once for the call (:class:`~memlane.dedup.guard.
    TextAnalyses`: the pairs of a large cluster span more texts than the shared caches hold)."""
    memo = TextAnalyses()
    return [p for p in pairs if passes(texts[p.a], texts[p.b], memo)]


#: The verdict of ``compare(b, a)`` given that of ``compare(a, b)``.
_INVERSE = {GuardVerdict.EXTENDS: GuardVerdict.NARROWS, GuardVerdict.NARROWS: GuardVerdict.EXTENDS}


@dataclass(slots=True)
class GuardTable:
    """The near-identical guard over every pair of a cluster's members (oldest first), each
    pair compared once. ``holds[(i, j)]``: member ``j``'s text holds member ``i``'s (same or
    extends); ``failed``: the pairs that fail the guard, with the guard's reason."""

    members: Sequence[Memory]
    holds: dict[tuple[int, int], bool] = field(default_factory=dict)
    failed: dict[tuple[int, int], str] = field(default_factory=dict)

    @classmethod
    def of(cls, members: Sequence[Memory]) -> GuardTable:
        table = cls(members)
        for (i, x), (j, y) in combinations(enumerate(members), 2):
            verdict, why = judge(x.content, y.content)
            if verdict is None:
                table.failed[(i, j)] = why
                continue
            table.holds[(i, j)] = verdict in _HOLDS
            table.holds[(j, i)] = _INVERSE.get(verdict, verdict) in _HOLDS
        return table

    def winner(self, group: Sequence[int]) -> tuple[Memory | None, str]:
        """The text that wins the members ``group`` (indices, oldest first) without a model:
        the newest whose text holds every other member's; ``(None, why)`` when a pair of them
        fails the guard or no member holds all the others."""
        for a, b in combinations(group, 2):
            if (a, b) in self.failed:
                x, y = self.members[a], self.members[b]
                return (
                    None,
                    f"{x.id} and {y.id} fail the near-identical guard ({self.failed[a, b]})",
                )
        for j in reversed(group):  # newest first
            if all(self.holds[(i, j)] for i in group if i != j):
                w = self.members[j]
                return w, f"near-identical; the newest text holding every member's words ({w.id})"
        return None, "near-identical pairs, but no member's text holds every other's words"

    def groups(self) -> list[list[int]]:
        """The members connected by pairs that pass the guard, two or more each, oldest first:
        a cluster of look-alikes split where the guard refuses."""
        edges = [(i, j) for i, j in self.holds if i < j]
        return [sorted(g) for g in _components(edges)]
