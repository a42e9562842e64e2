"""One search in two round trips (:class:`~memlane.store.base.SearchStep`), written once for
every backend.

Trip 1 (when the step is made): the catch-up reads of the scope's search caches (the BM25 index;
SQLite's ANN index too) and, for an injection turn, the turn's context
(:meth:`~memlane.store.sql.turns.Turns.context_sql`), in one batch. Trip 2
(:meth:`SQLSearchStep.prepare`): the BM25 hits are found in process, then one batch reads the
rows and embeddings of those hits and either runs the backend's vector statement (PostgreSQL:
HNSW in SQL, returning whole rows) or, for an in-process vector leg (SQLite), reads the rows of
the ANN hits with them. The search's later reads of those hits (``get_many``, ``cosines``) are
answered from what the trips read; anything else is the store's. Rows of a search that another
writer changes between the trips are read as of trip 2, as the store's methods would read them.

Inside a write transaction the step does nothing of its own: every read is the store's (its
reads must see the transaction's rows, which the caches never hold).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlane.store.base import ScoredId, TurnContext, TurnQuery, Vector
from memlane.store.index_cache import RowRef
from memlane.store.records import TextAsk, VectorAsk
from memlane.store.sql.errors import translating
from memlane.store.sql.feed import SQLFeed
from memlane.store.sql.rows import MEMORY_COLUMNS
from memlane.types import Association, Memory, Status

if TYPE_CHECKING:
    from memlane.store.sql.search import Search

#: Where the columns a search reads stand in a row of ``MEMORY_COLUMNS, embedding``.
_COLUMNS = [c.strip() for c in MEMORY_COLUMNS.split(",")]
_ID, _AGENT, _TYPE, _STATUS, _PROJECT = (
    _COLUMNS.index(c) for c in ("id", "agent", "type", "status", "project")
)
_EMBEDDING = len(_COLUMNS)


@translating
class SQLSearchStep:
    """A :class:`~memlane.store.base.SearchStep` over the store's :class:`Search` part."""

    def __init__(self, search: Search, owner: str, agent: str | None, turn: TurnQuery | None):
        self._s = search
        self._db = search.db  # driver errors translated (sql/errors.translating)
        self.owner = owner
        self.agent = agent
        self.context: TurnContext | None = None
        # Rows read by the trips, as read (key -> row, id -> key); a memory or an embedding is
        # made of a row only when the search asks for it (most hits never are: ~35 rows a turn,
        # of which the search reads a dozen).
        self._rows: dict[int, Sequence[Any]] = {}
        self._ids: dict[str, int] = {}
        self._memories: dict[str, Memory] = {}
        self._vectors: dict[str, Vector] = {}
        self._vector: tuple[VectorAsk, list[ScoredId]] | None = None
        self._fts: tuple[TextAsk, list[ScoredId]] | None = None
        self._pending: list[int] = []  # keys to read with the next batch
        self._live = not search.db.in_transaction()
        turns = search.turns
        if not self._live:
            if turn is not None:
                self.context = turns.turn_context(owner, turn.session, agent, turn.pinned)
            return
        db, cache, feed = search.db, search.cache, search.feed
        statements = []
        if turn is not None:
            statements = turns.context_sql(owner, turn.session, agent, turn.pinned)
        # The caches' watermarks under their lock; the batch without it (another search of the
        # process may run meanwhile); its changes applied under it, from where the index is then
        # (another search may have caught it up further: only newer rows are applied).
        with db.cache_lock():
            text = cache.text(owner, catch_up=False)
            statements.append(feed.changes_sql(owner, text.watermark, SQLFeed.TEXT_COLUMNS))
            vectors = cache.vector(owner, catch_up=False) if search.in_process else None
            if vectors is not None:
                statements.append(
                    feed.changes_sql(owner, vectors.watermark, SQLFeed.VECTOR_COLUMNS)
                )
        with db.read() as q:
            rows = q.batch(statements)
        # An index replaced meanwhile (a purge mark: rebuilt from the rows) catches up on its own.
        with db.cache_lock():
            if vectors is not None:
                changes = rows.pop()
                if cache.vectors.get(owner) is vectors:
                    mark = vectors.watermark
                    cache.apply_vector(owner, *feed.vector_rows(*_newer(feed, changes, mark)))
                else:
                    cache.vector(owner)
            changes = rows.pop()
            if cache.texts.get(owner) is text:
                cache.apply_text(owner, *feed.text_rows(*_newer(feed, changes, text.watermark)))
            else:
                cache.text(owner)
        if turn is not None:
            self.context = turns.context_of(owner, turn.session, rows)

    # ------------------------------------------------------------------ trip 2
    def prepare(self, vector: VectorAsk, text: TextAsk) -> None:
        if not self._live or {vector[:2], text[:2]} != {(self.owner, self.agent)}:
            return  # in a transaction, or another scope: every read is the store's
        s, owner = self._s, self.owner
        with s.db.cache_lock():  # the BM25 index filters the scope itself (project included)
            hits = s.cache.fts_hits(text, catch_up=False)
        self._pending = [key for key, _ in hits]  # read with the first batch below
        statement = s.vectors.search_sql(vector) if vector.k > 0 else None
        if statement is not None:
            self._vector = (vector, self._scored(self._read([], [statement])[0]))
        elif vector.k > 0:  # in process (SQLite): the ANN cache, caught up by trip 1
            with s.db.cache_lock():
                found = s.cache.vector_search(vector, refs=self.refs, catch_up=False)
            self._vector = (vector, found)
        self._fts = (text, s.cache.fts_resolve(owner, hits, self.refs, text.project))

    def _scored(self, rows: Sequence[Sequence[Any]]) -> list[ScoredId]:
        """The vector statement's rows as hits, best first (their rows and embeddings kept)."""
        hits = [ScoredId(self._keep(r), 1.0 - float(r[-1])) for r in rows]
        hits.sort(key=lambda h: -h.score)  # relaxed_order: near-sorted only
        return hits

    def _keep(self, row: Sequence[Any]) -> str:
        """Keep a row of ``MEMORY_COLUMNS, embedding``; its memory's id."""
        key, memory_id = int(row[0]), str(row[_ID])
        self._rows[key] = row
        self._ids[memory_id] = key
        return memory_id

    def _memory(self, memory_id: str) -> Memory:
        found = self._memories.get(memory_id)
        if found is None:
            row = self._rows[self._ids[memory_id]]
            found = self._memories[memory_id] = self._s.memories.rows.memory(row)
        return found

    def _embedding(self, memory_id: str) -> Vector:
        found = self._vectors.get(memory_id)
        if found is None:
            row = self._rows[self._ids[memory_id]]
            found = self._vectors[memory_id] = self._s.db.dialect.vec_out(row[_EMBEDDING])
        return found

    def _read(
        self, keys: Sequence[int], extra: list[tuple[str, list[Any]]]
    ) -> list[list[Sequence[Any]]]:
        """One batch: the rows (and embeddings) of ``keys`` not read yet, then ``extra``
        statements; the rows of ``extra``."""
        d, owner = self._s.db.dialect, self.owner
        todo = [k for k in dict.fromkeys([*keys, *self._pending]) if k not in self._rows]
        self._pending = []
        statements = [
            (
                f"SELECT {MEMORY_COLUMNS}, embedding FROM memories "
                f"WHERE {d.owner_filter} = ? AND {cond}",
                [owner, *args],
            )
            for cond, args in d.in_lists("num", todo, "bigint")
        ]
        if not statements and not extra:
            return []
        with self._s.db.read() as q:
            results = q.batch([*statements, *extra], binary=True)
        for rows in results[: len(statements)]:
            for row in rows:
                self._keep(row)
        return results[len(statements) :]

    def refs(self, owner: str, keys: Sequence[int]) -> dict[int, RowRef]:
        """:meth:`~memlane.store.index_cache.ChangeFeed.row_refs` through the step (rows not
        read yet are read in one batch)."""
        if owner != self.owner:
            return self._s.feed.row_refs(owner, keys)
        self._read(keys, [])
        out: dict[int, RowRef] = {}
        for key in keys:
            r = self._rows.get(key)
            if r is not None:
                active = r[_STATUS] == Status.ACTIVE.value
                out[key] = RowRef(r[_ID], r[_AGENT], r[_TYPE], active, r[_PROJECT])
        return out

    # ------------------------------------------------------------------ the search's reads
    # The legs take the contract's arguments (as the store's Search part does).
    def vector_search(self, *ask: Any, **named: Any) -> list[ScoredId]:
        asked = VectorAsk(*ask, **named)
        if self._vector is not None:
            prepared, hits = self._vector
            same = (*asked[:2], *asked[3:]) == (*prepared[:2], *prepared[3:])
            if same and asked.vector is prepared.vector:  # the query's own array
                return list(hits)
        return self._s.vector_search(*asked)

    def fts_search(self, *ask: Any, **named: Any) -> list[ScoredId]:
        asked = TextAsk(*ask, **named)
        if self._fts is not None and asked == self._fts[0]:
            return list(self._fts[1])
        return self._s.fts_search(*asked)

    def get_many(self, owner: str, ids: Sequence[str]) -> dict[str, Memory]:
        if owner != self.owner:
            return self._s.memories.get_many(owner, ids)
        out = {i: self._memory(i) for i in ids if i in self._ids}
        missing = [i for i in ids if i not in out]
        if missing:
            out.update(self._s.memories.get_many(owner, missing))
        return out

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        if owner != self.owner:
            return self._s.cosines(owner, ids, vector)
        out = {i: float(self._embedding(i) @ vector) for i in dict.fromkeys(ids) if i in self._ids}
        missing = [i for i in ids if i not in out]
        if missing:
            out.update(self._s.cosines(owner, missing, vector))
        return out

    def neighbours(self, owner: str, ids: Sequence[str]) -> list[Association]:
        return self._s.links.neighbours(owner, ids)

    def session_memory_ids(self, *args: Any) -> set[str]:
        return self._s.memories.session_memory_ids(*args)

    def list_memories(self, *args: Any, **kwargs: Any) -> list[Memory]:
        return self._s.memories.list_memories(*args, **kwargs)

    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        self._s.db.record_access(owner, ids)


def _newer(feed: SQLFeed, rows: Sequence[Sequence[Any]], watermark: int) -> tuple[list[Any], int]:
    """:meth:`SQLFeed.changed` of the catch-up ``rows`` numbered above ``watermark`` (the
    index's, which may have moved on since the rows were asked for)."""
    return feed.changed([r for r in rows if int(r[-1]) > watermark], watermark)
