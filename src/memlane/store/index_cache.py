"""The search caches of a store: per owner, an ANN index of the embeddings
(:class:`~memlane.store.vector_index.OwnerIndex`) and a BM25 index of the texts
(:class:`~memlane.store.text_index.TextIndex`), kept beside the database and caught up from it.

Backend-neutral. The database stays the source of truth and any process may write to it, so
before each read an index applies the rows changed since its *watermark*. What the cache needs
from a backend is the small :class:`ChangeFeed` protocol: changed rows in sequence order from a
watermark (SQLite: the ``vec_seq`` column; PostgreSQL: any monotonic change sequence the backend
keeps gap-free below what it has returned) and a few row lookups. The backend keeps its SQL; the
cache keeps the indexes, their catch-up, their files (:mod:`memlane.store.index_files`) and the
search over them. An owner's indexes hold every agent's, project's and type's memories; the BM25
index keeps each memory's scope beside its postings and filters inside the index, and the vector
leg asks it which keys a scope sees (no row read to reject a hit of another scope; the ANN
search asks as many more neighbours as the scope is rare among the owner's memories).

Thread safety: none of its own; the backend calls it under its lock. Transactions: the cache
reads committed rows only (through the feed). Rows the open transaction wrote are handed to
:meth:`IndexCache.note_pending` so that :meth:`IndexCache.nearest` (the dedup lookup) sees them
(read-your-writes); the backend calls :meth:`IndexCache.discard_pending` when the transaction
ends, committed (the feed returns them from then on) or rolled back (they never existed).

Purges (issue #33, docs/security.md "Purge"): a hard delete leaves no row for the feed to return,
so the backend records a *purge mark* per owner, numbered in the same change sequence, and the
feed returns it as a change of key :data:`PURGED`. An index that meets one (it was loaded or
built before the purge) is thrown away with the owner's saved files and rebuilt from the rows
left: no search or save of this process keeps a purged memory's terms or vector. :meth:`save`
checks again against the store itself before writing (an index holding a key the store no
longer has is dropped, not saved) and after (a purge that committed meanwhile removes what was
written), so no process writes a purged memory back to disk, whichever process purged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from memlane.store import index_files
from memlane.store.base import ScoredId, Vector
from memlane.store.records import TextAsk, VectorAsk
from memlane.store.text_index import TextIndex, tokens
from memlane.store.vector_index import OwnerIndex
from memlane.types import Memory, MemoryType, Status

#: A changed row for the vector index: ``(key, active, float32 embedding bytes)``.
VectorChange = tuple[int, bool, bytes]
#: A changed row for the BM25 index: ``(key, active, content, agent, type value, project)``.
TextChange = tuple[int, bool, str, str | None, str, str | None]
#: Query terms beyond this many (long pasted text) are ignored by the full-text leg.
MAX_QUERY_TERMS = 64
#: A scoped vector search asks the ANN index for at least this many times ``k`` at first, and
#: for ``k`` times the owner's memories over the scope's, times :data:`SCOPE_MARGIN` (HNSW's hits
#: are spread over the scopes as the memories are, give or take).
SCOPED_OVERFETCH = 3
SCOPE_MARGIN = 1.5
#: ... with an HNSW search breadth of this many times what it asks for (at least the index's
#: 96). Measured at 20,000 memories, 10 projects and global ones (one in five), a project seeing
#: 28 % of them, k = 10: recall@10 of the scope's exact top 10 over 220 questions 0.944 / 0.945
#: (two projects) at the index's breadth, 0.966 / 0.972 at 3x, 0.976 / 0.982 at 4x; the
#: over-fetch of before (3k, then 4x more while short) 0.951 / 0.956.
SCOPE_EXPANSION = 3
#: Indexes below this many rows are not saved on :meth:`IndexCache.save` (cheap to rebuild).
PERSIST_MIN_ROWS = 2000
#: The key of a change that says "rows of this owner were purged after your watermark" (row
#: keys are positive): the index is rebuilt from the rows left.
PURGED = -1


class RowRef(NamedTuple):
    """What a search needs to know of a row: its id, agent, type value, whether it is active,
    and its project (``None``: global)."""

    id: str
    agent: str | None
    type: str
    active: bool
    project: str | None = None


#: Reads the :class:`RowRef` of an owner's rows by key (:meth:`ChangeFeed.row_refs`' shape).
RefReader = Callable[[str, Sequence[int]], dict[int, "RowRef"]]


class ChangeFeed(Protocol):
    """What a backend gives the cache. ``key`` is the backend's integer row key (SQLite: ``num``),
    the key of both indexes. All calls are reads of one owner's rows only."""

    def store_id(self) -> str:
        """A stable id of this database (a saved cache of another id is ignored)."""
        ...

    def vector_changes(self, owner: str, watermark: int) -> tuple[list[VectorChange], int]:
        """``owner``'s rows changed after ``watermark`` (inserted, re-embedded, status changed),
        in change order, and the new watermark. Gap-free: no change numbered at or below the
        returned watermark may become visible later. Inside a write transaction, only changes
        committed before it (never its own, which a rollback could take back)."""
        ...

    def text_changes(self, owner: str, watermark: int) -> tuple[list[TextChange], int]:
        """As :meth:`vector_changes`, for the BM25 index (same sequence, other columns)."""
        ...

    def purged_after(self, owner: str, watermark: int) -> bool:
        """Whether some of ``owner``'s rows were purged (hard deleted) after ``watermark``."""
        ...

    def keys(self, owner: str) -> set[int]:
        """The keys of every row of ``owner`` in the store (any status)."""
        ...

    def row_refs(self, owner: str, keys: Sequence[int]) -> dict[int, RowRef]:
        """``{key: ref}`` of ``owner``'s rows among ``keys`` (any status); any number of keys."""
        ...

    def memories(self, owner: str, keys: Sequence[int]) -> dict[int, Memory]:
        """``{key: memory}`` of ``owner``'s rows among ``keys`` (any status, the open
        transaction's rows included); any number of keys."""
        ...

    def has_agent_scopes(self, owner: str) -> bool:
        """True when some of ``owner``'s memories belong to an agent (lookups must over-fetch)."""
        ...


class IndexCache:
    """Per-owner vector and BM25 indexes over a :class:`ChangeFeed`, saved to ``folder``.

    ``folder=None``: never loaded or saved. ``load_vector`` / ``load_text``: how a cold owner's
    saved copy is loaded (default :meth:`load_vector_file` / :meth:`load_text_file`); a backend
    may wrap or replace them.
    """

    def __init__(
        self,
        feed: ChangeFeed,
        dimension: int,
        folder: Path | None,
        *,
        load_vector: Callable[[str], OwnerIndex | None] | None = None,
        load_text: Callable[[str], TextIndex | None] | None = None,
    ) -> None:
        self.feed = feed
        self.dimension = dimension
        self.folder = folder
        self.vectors: dict[str, OwnerIndex] = {}
        self.texts: dict[str, TextIndex] = {}
        #: Rows of the open transaction: owner -> key -> (agent, embedding).
        self.pending: dict[str, dict[int, tuple[str | None, Vector]]] = {}
        self._load_vector = load_vector or self.load_vector_file
        self._load_text = load_text or self.load_text_file

    # ------------------------------------------------------------------ indexes
    def vector(self, owner: str, *, catch_up: bool = True) -> OwnerIndex:
        """``owner``'s vector index (loaded or built on first use), caught up with the feed
        (``catch_up=False``: as it is, for a caller that applies the changes itself)."""
        index = self.vectors.get(owner)
        if index is None:
            index = self.vectors[owner] = self._load_vector(owner) or OwnerIndex(self.dimension)
        if catch_up:
            self.apply_vector(owner, *self.feed.vector_changes(owner, index.watermark))
        return self.vectors[owner]

    def text(self, owner: str, *, catch_up: bool = True) -> TextIndex:
        """``owner``'s BM25 index (loaded or built on first use), caught up with the feed
        (``catch_up=False``: as it is)."""
        index = self.texts.get(owner)
        if index is None:
            index = self.texts[owner] = self._load_text(owner) or TextIndex()
        if catch_up:
            self.apply_text(owner, *self.feed.text_changes(owner, index.watermark))
        return self.texts[owner]

    def apply_vector(self, owner: str, changes: list[VectorChange], watermark: int) -> None:
        """Apply the feed's ``changes`` up to ``watermark`` to ``owner``'s vector index; a
        :data:`PURGED` change among them (the index predates a purge) rebuilds it from the
        rows (and removes the owner's saved files)."""
        index = self.vector(owner, catch_up=False)
        if index.watermark > 0 and any(change[0] == PURGED for change in changes):
            self._forget(owner)
            index = self.vectors[owner] = OwnerIndex(self.dimension)
            changes, watermark = self.feed.vector_changes(owner, 0)
        index.apply([c for c in changes if c[0] != PURGED], watermark)

    def apply_text(self, owner: str, changes: list[TextChange], watermark: int) -> None:
        """As :meth:`apply_vector`, for ``owner``'s BM25 index."""
        index = self.text(owner, catch_up=False)
        if index.watermark > 0 and any(change[0] == PURGED for change in changes):
            self._forget(owner)
            index = self.texts[owner] = TextIndex()
            changes, watermark = self.feed.text_changes(owner, 0)
        index.apply([c for c in changes if c[0] != PURGED], watermark)

    def _forget(self, owner: str) -> None:
        """``owner``'s indexes predate a purge: both are dropped (each is rebuilt from the rows
        on next use) with their saved files; the open transaction's pending rows are kept."""
        self.vectors.pop(owner, None)
        self.texts.pop(owner, None)
        if self.folder is not None:
            index_files.remove(self.folder, owner)

    def note_pending(self, owner: str, key: int, agent: str | None, vector: Vector) -> None:
        """Row ``key`` of ``(owner, agent)`` was inserted or re-embedded in the open transaction
        (seen by :meth:`nearest` until :meth:`discard_pending`)."""
        self.pending.setdefault(owner, {})[key] = (agent, vector)

    def discard_pending(self) -> None:
        """The transaction ended (commit or rollback): forget its rows."""
        self.pending.clear()

    def drop(self, owner: str) -> None:
        """Forget ``owner``'s indexes, in memory and their saved files (after a purge: they are
        rebuilt from the rows on next use, and no file keeps a purged text's terms)."""
        self.vectors.pop(owner, None)
        self.texts.pop(owner, None)
        self.pending.pop(owner, None)
        if self.folder is not None:
            index_files.remove(self.folder, owner)

    # ------------------------------------------------------------------ persistence
    def load_vector_file(self, owner: str) -> OwnerIndex | None:
        """``owner``'s vector index saved in the folder, or ``None`` (none, stale, damaged)."""
        if self.folder is None:
            return None
        return index_files.load_vector(self.folder, owner, self.feed.store_id(), self.dimension)

    def load_text_file(self, owner: str) -> TextIndex | None:
        """``owner``'s BM25 index saved in the folder, or ``None`` (none, stale, damaged)."""
        if self.folder is None:
            return None
        return index_files.load_text(self.folder, owner, self.feed.store_id())

    def save(self, min_rows: int = PERSIST_MIN_ROWS) -> None:
        """Save every index of at least ``min_rows`` rows that changed since it was loaded or
        saved. Never raises for an unwritable folder (the next process rebuilds).

        An index is saved only when the store still holds every row it holds and no purge of
        its owner came after its watermark; else it is dropped (in memory and its files). After
        writing, a purge that committed meanwhile removes the files again (the purging process
        removes them after its commit, so one of the two always does)."""
        folder = self.folder
        if folder is None:
            return
        store_id = self.feed.store_id()
        due = {
            owner
            for indexes in (self.vectors, self.texts)
            for owner, index in indexes.items()
            if len(index) >= min_rows and index.saved_at != index.watermark
        }
        for owner in sorted(due):
            vector, text = self.vectors.get(owner), self.texts.get(owner)
            if not self._still_stored(owner, vector, text):
                self._forget(owner)
                continue
            saved = min(i.watermark for i in (vector, text) if i is not None)
            if (
                vector is not None
                and len(vector) >= min_rows
                and vector.saved_at != vector.watermark
            ):
                index_files.save_vector(folder, owner, store_id, vector)
            if text is not None and len(text) >= min_rows and text.saved_at != text.watermark:
                index_files.save_text(folder, owner, store_id, text)
            if self.feed.purged_after(owner, saved):  # a purge committed while writing
                self._forget(owner)

    def _still_stored(self, owner: str, vector: OwnerIndex | None, text: TextIndex | None) -> bool:
        """Whether ``owner``'s indexes hold only rows the store still has (and no purge of the
        owner came after their watermarks)."""
        indexes = [i for i in (vector, text) if i is not None]
        if any(self.feed.purged_after(owner, i.watermark) for i in indexes):
            return False
        stored = self.feed.keys(owner)
        held: set[int] = set()
        if vector is not None:
            held.update(int(k) for k in vector.keys().tolist())
        if text is not None:
            held.update(text.key_set())
        return held <= stored

    # ------------------------------------------------------------------ searches
    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        """Up to ``k`` active memories of exactly ``(owner, agent)``, nearest first, with their
        cosine to ``vector``; the pending rows of the open transaction included."""
        index = self.vector(owner)
        pending = [
            (key, p_vec)
            for key, (p_agent, p_vec) in self.pending.get(owner, {}).items()
            if p_agent == agent
        ]
        pending_scores: dict[int, float] = {}
        if pending:  # rows written in this transaction: not in the index yet
            sims = np.stack([v for _, v in pending]) @ np.asarray(vector, dtype=np.float32)
            for (key, _), sim in zip(pending, sims.tolist(), strict=True):
                pending_scores[key] = float(sim)
        # The index holds every agent's memories of the owner: when other scopes exist, ask
        # for more and, if other agents' near-copies still crowd out this scope, ask again.
        over = k * 4 if agent is not None or self.feed.has_agent_scopes(owner) else k
        while True:
            found = index.search(vector, over)
            scores = dict(found)
            scores.update(pending_scores)
            out = self._scoped(owner, scores, k, agent)
            if len(out) >= k or len(found) < over:
                return out
            over *= 4

    def _scoped(
        self, owner: str, scores: dict[int, float], k: int, agent: str | None
    ) -> list[tuple[Memory, float]]:
        """The best ``k`` active memories of exactly ``agent`` among ``scores`` (key -> cosine),
        best first (ties by key). Rows are read in chunks of ``k``, best first, only until
        ``k`` qualify."""
        ranked = sorted(scores, key=lambda key: (-scores[key], key))
        out: list[tuple[Memory, float]] = []
        for start in range(0, len(ranked), max(k, 1)):
            chunk = ranked[start : start + k]
            rows = self.feed.memories(owner, chunk)
            for key in chunk:
                mem = rows.get(key)
                if mem is not None and mem.status is Status.ACTIVE and mem.agent == agent:
                    out.append((mem, scores[key]))
            if len(out) >= k:
                break
        return out[:k]

    def vector_search(
        self, ask: VectorAsk, *, refs: RefReader | None = None, catch_up: bool = True
    ) -> list[ScoredId]:
        """Top ``k`` active memories of the scope (``agent=None``: all the owner's; else that
        agent's and shared ones; ``project`` likewise: that project's and global ones), of
        ``types`` when given, by cosine, best first.

        Scoped, the ANN index is asked for ``max(3k, 1.5 k N / n)`` neighbours (``N`` the
        owner's memories, ``n`` the scope's, both from the BM25 index) with a search breadth
        of :data:`SCOPE_EXPANSION` times that (HNSW), then 4 times more while
        other scopes' memories still crowd the scope out; the BM25 index tells which hits the
        scope sees, and only those hits' rows are read (the rows decide: a hit whose row is
        not active or not of the scope is dropped). ``refs``: where the hits' rows are read
        (default: the feed's ``row_refs``); ``catch_up=False``: the caller caught both indexes
        up."""
        owner, agent, vector, k, types, project = ask
        wanted = None if not types else {MemoryType(t).value for t in types}
        index = self.vector(owner, catch_up=catch_up)
        read = refs or self.feed.row_refs
        scoped = agent is not None or project is not None or wanted is not None
        text = self.text(owner, catch_up=catch_up) if scoped else None
        over = k
        if text is not None:
            seen = text.scope_size(agent, project, wanted)
            if seen == 0 and text.watermark >= index.watermark:
                return []  # the scope holds no memory (and the BM25 index is not behind)
            over = max(k * SCOPED_OVERFETCH, int(k * SCOPE_MARGIN * len(index) / max(seen, 1)))
        while True:
            found = index.search(vector, over, over * SCOPE_EXPANSION if scoped else None)
            exhausted = len(found) < over
            if text is not None:  # 1 in the scope, -1 unknown to the BM25 index: the row decides
                inside = text.in_scope([key for key, _ in found], agent, project, wanted)
                found = [hit for hit, flag in zip(found, inside.tolist(), strict=True) if flag]
            refs_found = read(owner, [key for key, _ in found])
            out: list[ScoredId] = []
            for key, cos in found:
                ref = refs_found.get(key)
                if ref is None or not ref.active:
                    continue
                if agent is not None and ref.agent not in (None, agent):
                    continue
                if project is not None and ref.project not in (None, project):
                    continue
                if wanted is None or ref.type in wanted:
                    out.append(ScoredId(ref.id, cos))
            if len(out) >= k or exhausted:
                return out[:k]
            over *= 4

    def fts_search(
        self, ask: TextAsk, *, refs: RefReader | None = None, catch_up: bool = True
    ) -> list[ScoredId]:
        """Top ``k`` memories of the scope (of ``types`` when given) by BM25 over the first
        :data:`MAX_QUERY_TERMS` terms of ``query`` (plain text), best first; ``[]`` when the
        query has no content word. The BM25 index filters the scope (agent, project, types)
        itself, before its top ``k``. ``refs``, ``catch_up``: as :meth:`vector_search`'s."""
        hits = self.fts_hits(ask, catch_up=catch_up)
        return self.fts_resolve(ask.owner, hits, refs, ask.project)

    def fts_hits(self, ask: TextAsk, *, catch_up: bool = True) -> list[tuple[int, float]]:
        """:meth:`fts_search`'s hits as ``(key, score)``, before their rows are read."""
        owner, agent, query, k, types, project = ask
        terms = tokens(query)[:MAX_QUERY_TERMS]
        if not terms or k <= 0:
            return []
        wanted = None if not types else [MemoryType(t).value for t in types]
        return self.text(owner, catch_up=catch_up).search(terms, k, agent, wanted, project)

    def fts_resolve(
        self,
        owner: str,
        hits: list[tuple[int, float]],
        refs: RefReader | None = None,
        project: str | None = None,
    ) -> list[ScoredId]:
        """:meth:`fts_hits`' hits as ids (rows read by ``refs``, default the feed's); with
        ``project``, only that project's and global ones (the index filtered them already:
        the rows, the source of truth, confirm it)."""
        if not hits:
            return []
        found = (refs or self.feed.row_refs)(owner, [key for key, _ in hits])
        return [
            ScoredId(found[key].id, score)
            for key, score in hits
            if key in found and (project is None or found[key].project in (None, project))
        ]
