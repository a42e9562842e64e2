"""The janitor: duplicate clusters found after the fact, merged one cluster at a time
(ARCHITECTURE.md, "Batch dedup"; docs/dedup.md, "The janitor").

Per owner, never across owners (and never across agent scopes):

1. **Candidates**, never all pairs (:meth:`~memlane.store.base.MemoryStore.candidate_pairs`):
   each memory's :data:`NEIGHBOURS` nearest in the vector index (brute force for the memories
   the HNSW graph does not lead back to), memories with identical vectors, and memories sharing
   a rare key token (a term of 2 to :data:`MAX_DF` memories), kept at cosine >= ``[dedup]
   gray_low``.
2. **Clusters**: union-find over those pairs; a memory is in at most one cluster, so it is merged
   at most once per run. A cluster over :data:`MAX_CLUSTER` members (a chain of look-alikes) is
   split into the parts its candidate pairs that pass the near-identical guard connect; a part
   still over the limit is skipped (reported).
3. **One merge per cluster.** With an LLM that can merge (:class:`~memlane.llm.Merger`), the model
   names the members that say the same thing and writes one text for them (checked: not empty,
   not an injected block, not longer than those members together). Without one, or when the call
   fails, the *guard rule*: every pair of members must pass the near-identical guard (verdict
   same, extends or narrows, or a compound variant), and the text that wins is the newest one that
   says at least what every other member says (same or extends): the newest text wins without
   losing a word another member had. A cluster refused as a whole is split into the parts that
   passing pairs connect, and each part whose pairs all pass is merged alone (copies of one text
   always are); the rest is skipped ("skipped by the guard").
4. **Provenance**, in one transaction per cluster
   (:meth:`~memlane.store.base.MemoryStore.merge_memories`): the oldest member survives (its id);
   every member's text goes to its history; associations move to it; it takes the highest
   importance, the earliest ``created_at``, the sum of the confirmations and every member's
   metadata (``merged_from``: the absorbed ids); the others become ``superseded`` with
   ``merged_into``; one ``janitor_merge`` row per absorbed member goes to the dedup log (a review
   can reverse it). A cluster whose members changed since they were read is skipped.

A second run finds nothing new: the absorbed members are no longer active, so no pair reaches
them; a merged part had no passing pair to the members left, and the survivor carries one of its
texts, so the next run refuses the same pairs again. The one exception is the approximate index:
a pair that both of its members' HNSW searches missed (measured at 100,000 memories: 0 or 1 of
7,151 merges) may surface once the graph no longer holds the absorbed members.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memlane._text import content_hash
from memlane.config import DedupSettings
from memlane.dedup.clusters import GuardTable, clusters_of, passing_pairs
from memlane.dedup.review import kept_apart
from memlane.embeddings.cache import Embeddings
from memlane.history import is_injection_text
from memlane.llm import LLM, Merger
from memlane.store.base import CandidatePair, ClusterMerge, MemoryStore, NewDedupLog
from memlane.store.metadata import merge_metadata
from memlane.types import ChangeReason, Decision, Memory, ReviewStatus, Status

__all__ = ["MAX_CLUSTER", "MAX_DF", "NEIGHBOURS", "ClusterPlan", "Janitor", "JanitorReport"]

#: Nearest neighbours asked of the vector index per memory (the write path asks for 8; a few more
#: here, because a cluster's members may crowd each other's lists).
NEIGHBOURS = 10
#: A "rare" key token is held by at most this many memories of the owner (bounds its pairs to 6).
MAX_DF = 4
#: Larger clusters (chains of look-alikes through union-find) are skipped, not merged blindly.
MAX_CLUSTER = 32

#: ``progress(label, done, total)``.
Progress = Callable[[str, int, int], None]


@dataclass(slots=True)
class ClusterPlan:
    """What the janitor decided for one cluster. ``members``: oldest first; ``action``:
    ``merge`` (``survivor`` takes ``text``, ``absorbed`` are superseded) or ``skip``;
    ``via``: ``llm`` or ``guard``; ``outcome``: ``merged``, ``planned`` (dry run), or why it
    was skipped (``guard``, ``llm_keep``, ``review``: a pair or cluster a review kept apart,
    ``too_large``, ``changed``)."""

    owner: str
    members: list[Memory]
    similarity: float
    action: Literal["merge", "skip"]
    outcome: str
    via: str | None = None
    survivor: str | None = None
    absorbed: list[str] = field(default_factory=list)
    text: str | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "members": [{"id": m.id, "content": m.content} for m in self.members],
            "similarity": round(self.similarity, 4),
            "action": self.action,
            "outcome": self.outcome,
            "via": self.via,
            "survivor": self.survivor,
            "absorbed": self.absorbed,
            "text": self.text,
            "reason": self.reason,
        }


@dataclass(slots=True)
class JanitorReport:
    """The figures of one run (``seconds``: wall time; ``candidate_pairs``: pairs scored, never
    all; ``pairs``: those at or above ``gray_low``; ``merged``: clusters merged (``planned``:
    those a dry run would merge); ``absorbed``:
    memories superseded by a merge; ``phase_seconds``: wall time of ``candidates`` (the pairs),
    ``clusters`` (union-find, reading the members, splitting large clusters) and ``merges``
    (planning, the model's calls, the transactions), summed over the owners)."""

    dry_run: bool
    owners: list[str] = field(default_factory=list)
    memories: int = 0
    candidate_pairs: int = 0
    pairs: int = 0
    by_source: dict[str, int] = field(default_factory=lambda: {"vector": 0, "tokens": 0})
    clusters: int = 0
    merged: int = 0
    planned: int = 0
    absorbed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    llm_calls: int = 0
    llm_failures: int = 0
    seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    plans: list[ClusterPlan] = field(default_factory=list)

    def time(self, phase: str, since: float) -> float:
        """Add the seconds since ``since`` (``time.perf_counter()``) to ``phase``; returns now."""
        now = time.perf_counter()
        self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + now - since
        return now

    @property
    def skipped_by_guard(self) -> int:
        return self.skipped.get("guard", 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "owners": self.owners,
            "memories": self.memories,
            "candidate_pairs": self.candidate_pairs,
            "candidate_pairs_per_memory": round(self.candidate_pairs / max(self.memories, 1), 2),
            "pairs": self.pairs,
            "by_source": dict(self.by_source),
            "clusters": self.clusters,
            "merged": self.merged,
            "planned": self.planned,
            "absorbed": self.absorbed,
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_by_guard": self.skipped_by_guard,
            "llm_calls": self.llm_calls,
            "llm_failures": self.llm_failures,
            "seconds": round(self.seconds, 3),
            "phase_seconds": {k: round(v, 3) for k, v in self.phase_seconds.items()},
            "plans": [p.to_dict() for p in self.plans],
        }


class Janitor:
    """Finds and merges duplicate clusters of a store (see the module doc)."""

    def __init__(
        self,
        store: MemoryStore,
        embeddings: Embeddings,
        settings: DedupSettings,
        llm: LLM | None = None,
    ) -> None:
        self.store = store
        self.embeddings = embeddings
        self.settings = settings
        self.llm = llm

    def run(
        self, owners: Sequence[str], *, dry_run: bool = False, progress: Progress | None = None
    ) -> JanitorReport:
        """One pass over each of ``owners``. ``dry_run``: plan (the LLM is asked when one is
        configured) but write nothing. Raises :class:`~memlane.errors.StoreError` (a cluster
        whose transaction failed is rolled back whole; earlier clusters stay merged)."""
        started = time.perf_counter()
        report = JanitorReport(dry_run=dry_run, owners=list(owners))
        for owner in owners:
            self._owner(owner, report, dry_run, progress)
        report.seconds = time.perf_counter() - started
        return report

    def _owner(
        self, owner: str, report: JanitorReport, dry_run: bool, progress: Progress | None
    ) -> None:
        tick = None if progress is None else (lambda d, t: progress(f"pairs of {owner}", d, t))
        started = time.perf_counter()
        found = self.store.candidate_pairs(
            owner,
            neighbours=NEIGHBOURS,
            min_similarity=self.settings.gray_low,
            max_df=MAX_DF,
            progress=tick,
        )
        report.memories += found.memories
        report.candidate_pairs += found.considered
        report.pairs += len(found.pairs)
        for source, n in found.by_source.items():
            report.by_source[source] = report.by_source.get(source, 0) + n
        started = report.time("candidates", started)
        groups = clusters_of(found.pairs)
        # pairs a review kept apart link no cluster; a cluster still joining them is skipped
        if apart := kept_apart(self.store, owner, [i for g, _ in groups for i in g]):
            pairs = [p for p in found.pairs if frozenset((p.a, p.b)) not in apart]
            dropped = len(found.pairs) - len(pairs)
            report.skipped["review"] = report.skipped.get("review", 0) + dropped
            groups = clusters_of(pairs)
        report.clusters += len(groups)
        rows = self.store.get_many(owner, [i for g, _ in groups for i in g])
        kept: set[str] = (
            self._kept_before(owner) if groups and isinstance(self.llm, Merger) else set()
        )
        units: list[tuple[list[Memory], float]] = []  # the clusters to plan, oldest member first
        large = [(g, sim) for g, sim in groups if len(g) > MAX_CLUSTER]
        for group, sim in groups:
            if len(group) <= MAX_CLUSTER:
                units.append((sorted((rows[i] for i in group if i in rows), key=_age), sim))
        for parts, sim in _split_large(large, found.pairs, rows):
            for part in parts:
                if len(part) > MAX_CLUSTER:
                    plan = ClusterPlan(
                        owner, [], sim, "skip", "too_large", reason=f"{len(part)} members"
                    )
                    report.skipped["too_large"] = report.skipped.get("too_large", 0) + 1
                    report.plans.append(plan)
                else:
                    units.append((part, sim))
        started = report.time("clusters", started)
        why_kept = "kept apart by the LLM in an earlier run (the same members)"
        for n, (members, sim) in enumerate(units, 1):
            ids = {m.id for m in members}
            if any(pair <= ids for pair in apart):
                why = "a review kept two of its members apart"
                plans = [ClusterPlan(owner, members, sim, "skip", "review", reason=why)]
            elif _fingerprint(members) in kept:  # the model kept these apart in a past run
                plans = [
                    ClusterPlan(owner, members, sim, "skip", "llm_keep", "llm", reason=why_kept)
                ]
            else:
                plans = self._plan(owner, members, sim, report)
            for plan in plans:
                if plan.outcome == "llm_keep" and not dry_run and plan.reason != why_kept:
                    self._remember_kept(plan)
                if plan.action == "merge":
                    if dry_run:
                        plan.outcome = "planned"
                    elif self._apply(plan):
                        plan.outcome = "merged"
                    else:
                        plan.action, plan.outcome = "skip", "changed"
                if plan.outcome == "planned":
                    report.planned += 1
                if plan.outcome == "merged":
                    report.merged += 1
                    report.absorbed += len(plan.absorbed)
                elif plan.action == "skip":
                    report.skipped[plan.outcome] = report.skipped.get(plan.outcome, 0) + 1
                report.plans.append(plan)
            if progress is not None:
                progress(f"clusters of {owner}", n, len(units))
        report.time("merges", started)

    # ------------------------------------------------------------------ the model's "keep"
    def _kept_before(self, owner: str) -> set[str]:
        """Fingerprints of the clusters the model kept apart in earlier runs (their
        ``llm_keep`` rows in the dedup log): not asked again while their members stay the same."""
        rows = self.store.dedup_log(owner, decision=Decision.LLM_KEEP, limit=1_000_000)
        return {
            r.reasoning.split()[1]
            for r in rows
            if r.reasoning and r.reasoning.startswith(_KEEP_TAG) and len(r.reasoning.split()) > 1
        }

    def _remember_kept(self, plan: ClusterPlan) -> None:
        """One ``llm_keep`` row (confirmed: nothing to review) naming the cluster's fingerprint."""
        first, second = plan.members[0], plan.members[1]
        with self.store.transaction():
            self.store.log_dedup(
                NewDedupLog(
                    owner=plan.owner,
                    new_text=second.content,
                    existing_id=first.id,
                    existing_text=first.content,
                    similarity=round(plan.similarity, 6),
                    decision=Decision.LLM_KEEP,
                    reasoning=f"{_KEEP_TAG} {_fingerprint(plan.members)} {plan.reason}".strip(),
                    review_status=ReviewStatus.CONFIRMED,
                )
            )

    # ------------------------------------------------------------------ planning
    def _plan(
        self, owner: str, members: list[Memory], sim: float, report: JanitorReport
    ) -> list[ClusterPlan]:
        """The plans of one cluster: one (the model's merge or keep, or the guard rule's merge
        of the whole cluster), or, when the guard refuses the whole, a merge per part whose
        pairs all pass and a skip for the rest."""
        prefix = ""
        if isinstance(self.llm, Merger):
            report.llm_calls += 1
            try:
                verdict = self.llm.merge_memories([m.content for m in members])
            except Exception as exc:  # any failure: the guard rule decides, nothing is lost
                report.llm_failures += 1
                prefix = f"LLM failed ({exc}); "
            else:
                tag = f"[{verdict.prompt_version}] " if verdict.prompt_version else ""
                why = f"{tag}{verdict.reasoning or ''}".strip()
                chosen = [members[i] for i in verdict.members]
                if verdict.action == "keep" or len(chosen) < 2:
                    return [ClusterPlan(owner, members, sim, "skip", "llm_keep", "llm", reason=why)]
                text = (verdict.merged_text or "").strip()
                problem = self._text_problem(text, chosen)
                if problem is None:
                    return [
                        ClusterPlan(
                            owner,
                            members,
                            sim,
                            "merge",
                            "planned",
                            "llm",
                            chosen[0].id,
                            [m.id for m in chosen[1:]],
                            text,
                            why,
                        )
                    ]
                prefix = f"LLM merge refused: {problem}; "
        table = GuardTable.of(members)
        whole = list(range(len(members)))
        winner, why = table.winner(whole)
        if winner is not None:
            return [_guard_merge(owner, members, sim, winner, prefix + why)]
        # Refused as a whole: a cluster of look-alikes often holds a near-copy pair among
        # members the guard keeps apart ("born on May 3" next to "born on May 4"). Each part
        # connected by passing pairs is merged when all its pairs pass; the rest is skipped.
        # A merged part has no passing pair to any other member, so the survivor (one of its
        # texts) finds no new partner in the next run.
        plans: list[ClusterPlan] = []
        rest = set(whole)
        for group in table.groups():
            parts = [group] if len(group) < len(members) else []
            if not parts or table.winner(group)[0] is None:
                # refused too: its copies of one text (one content hash) are still merged, so
                # a text never stays stored twice; the survivor has that text, whose pairs
                # with the others were refused, and the next run refuses them again
                copies: dict[str, list[int]] = {}
                for i in group:
                    copies.setdefault(members[i].content_hash, []).append(i)
                parts = [c for c in copies.values() if len(c) > 1]
            for part_ids in parts:
                part_winner, part_why = table.winner(part_ids)
                if part_winner is not None:
                    part = [members[i] for i in part_ids]
                    plans.append(_guard_merge(owner, part, sim, part_winner, prefix + part_why))
                    rest -= set(part_ids)
        if len(rest) > 1:
            left = [members[i] for i in sorted(rest)]
            plans.append(
                ClusterPlan(owner, left, sim, "skip", "guard", "guard", reason=prefix + why)
            )
        return plans

    def _text_problem(self, text: str, chosen: Sequence[Memory]) -> str | None:
        if not text:
            return "the merged text is empty"
        if is_injection_text(text):
            return "the merged text is an injected context block"
        limit = min(sum(len(m.content) + 1 for m in chosen), self.settings.max_chars)
        if len(text) > limit:
            return f"the merged text ({len(text)} chars) is longer than its members together"
        return None

    # ------------------------------------------------------------------ applying
    def _apply(self, plan: ClusterPlan) -> bool:
        """Merge one planned cluster in one transaction; ``False`` when a member changed."""
        store, owner = self.store, plan.owner
        assert plan.survivor is not None and plan.text is not None
        ids = [plan.survivor, *plan.absorbed]
        same_text = [m.id for m in plan.members if m.content == plan.text]
        vector = store.embeddings(owner, same_text[:1]).get(same_text[0]) if same_text else None
        if vector is None:  # the model's own wording: embedded before the transaction
            vector = self.embeddings.embed([plan.text])[0]
        planned = {m.id: m.content_hash for m in plan.members}
        with store.transaction():
            now = store.get_many(owner, ids)
            if any(
                (m := now.get(i)) is None
                or m.status is not Status.ACTIVE
                or m.content_hash != planned[i]
                for i in ids
            ):
                return False
            group = [now[i] for i in ids]
            metadata: dict[str, Any] = {}
            for m in group:
                metadata = merge_metadata(metadata, m.metadata)
            metadata = merge_metadata(metadata, {"merged_from": list(plan.absorbed)})
            store.merge_memories(
                owner,
                ClusterMerge(
                    survivor=plan.survivor,
                    absorbed=list(plan.absorbed),
                    content=plan.text,
                    content_hash=content_hash(plan.text),
                    embedding=vector,
                    importance=max(m.importance for m in group),
                    created_at=min(m.created_at for m in group),
                    confirmations=sum(m.confirmations for m in group),
                    metadata=metadata,
                    reason=ChangeReason.JANITOR_MERGE,
                ),
            )
            # one row per text the merge took out of the store (the survivor's old one too), so
            # a review can reverse it; a text that lives on is not one
            for m in (x for x in group if x.content != plan.text or x.id != plan.survivor):
                store.log_dedup(
                    NewDedupLog(
                        owner=owner,
                        new_text=m.content,
                        existing_id=plan.survivor,
                        existing_text=plan.text,
                        similarity=round(plan.similarity, 6),
                        decision=Decision.JANITOR_MERGE,
                        reasoning=f"[janitor:{plan.via}] {plan.reason}".strip(),
                        review_status=ReviewStatus.UNREVIEWED,
                    )
                )
        return True


def _guard_merge(
    owner: str, members: list[Memory], sim: float, winner: Memory, why: str
) -> ClusterPlan:
    """A merge by the guard rule: the oldest id survives with the winner's text."""
    return ClusterPlan(
        owner,
        members,
        sim,
        "merge",
        "planned",
        "guard",
        members[0].id,
        [m.id for m in members[1:]],
        winner.content,
        why,
    )


def _split_large(
    large: Sequence[tuple[list[str], float]],
    pairs: Sequence[CandidatePair],
    rows: dict[str, Memory],
) -> list[tuple[list[list[Memory]], float]]:
    """Clusters over :data:`MAX_CLUSTER` members (chains of look-alikes joined by union-find)
    split into the parts their candidate pairs that pass the near-identical guard connect
    (two or more members each, oldest first). Only the candidate pairs are compared, never
    all pairs of a large cluster; a part may still be over the limit (then it is skipped)."""
    if not large:
        return []
    where = {i: n for n, (group, _) in enumerate(large) for i in group}
    edges: list[list[CandidatePair]] = [[] for _ in large]
    for p in pairs:
        n = where.get(p.a)
        if n is not None and p.a in rows and p.b in rows:
            edges[n].append(p)
    texts = {i: rows[i].content for i in where if i in rows}
    out = []
    for (_, sim), inside in zip(large, edges, strict=True):
        passing = passing_pairs(inside, texts)
        parts = [sorted((rows[i] for i in ids), key=_age) for ids, _ in clusters_of(passing)]
        out.append((parts, sim))
    return out


#: How an ``llm_keep`` row of the janitor's starts: ``[janitor:keep] <fingerprint> <reasoning>``.
_KEEP_TAG = "[janitor:keep]"


def _fingerprint(members: Sequence[Memory]) -> str:
    """A cluster's identity: its member ids and their content hashes (a changed member or a new
    one makes another cluster, which the model is asked about again)."""
    joined = "|".join(sorted(f"{m.id}:{m.content_hash}" for m in members))
    return hashlib.sha256(joined.encode()).hexdigest()[:24]


def _age(m: Memory) -> tuple[Any, str]:
    return (m.created_at, m.id)
