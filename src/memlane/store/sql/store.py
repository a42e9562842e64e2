"""The one SQL implementation of :class:`~memlane.store.base.MemoryStore`: the parts of
:mod:`memlane.store.sql` composed over a backend's :class:`~memlane.store.sql.database.Database`
and :class:`~memlane.store.sql.database.VectorLeg`. A backend's ``open`` builds those two and
this class; nothing here knows which backend it runs on.

The store is assembled from its parts, not written over them: each contract method is
``name = forward(Part.name, "_part")`` (:func:`~memlane.store.sql.errors.forward`), so its
signature is written once, in the part that implements it, and mypy checks that part's
signature against the contract (:class:`~memlane.store.base.MemoryStore`). What is left here is
what belongs to the store as a whole: opening (the model check), closing, the transaction.

Parts: :class:`~.memories.Memories` (rows, writes, reads), :class:`~.links.Links` (associations,
dedup log), :class:`~.sessions.Sessions`, :class:`~.turns.Turns` (an injection turn in whole
steps), :class:`~.search.Search` (vector leg, BM25, cosines, candidate pairs) and
:class:`~.maintenance.Maintenance` (merge, purge, restore). Search legs: vectors by the
backend's leg (SQLite: the in-process ANN cache; PostgreSQL: HNSW in SQL); full text by the
backend-neutral BM25 cache (:mod:`memlane.store.text_index`), caught up from the change feed
(:mod:`.feed`) before every search, so both backends rank text the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, TypeVar

from memlane._ids import new_id
from memlane.errors import EmbeddingMismatch
from memlane.store.index_cache import PERSIST_MIN_ROWS, IndexCache
from memlane.store.sql.database import Database, VectorLeg
from memlane.store.sql.errors import forward, translating
from memlane.store.sql.feed import SQLFeed
from memlane.store.sql.links import Links
from memlane.store.sql.maintenance import Maintenance
from memlane.store.sql.memories import Memories
from memlane.store.sql.search import Search
from memlane.store.sql.sessions import Sessions
from memlane.store.sql.turn_records import TurnRecords
from memlane.store.sql.turns import Turns

#: The backend's :class:`Database` (its own type, so that :attr:`SQLStore.db` gives the backend's
#: tools and tests its own methods without a cast).
DB = TypeVar("DB", bound=Database)


@translating
class SQLStore(Generic[DB]):
    """A :class:`~memlane.store.base.MemoryStore` over SQL. Thread-safe as far as its
    :class:`Database` is (SQLite: one connection behind a lock; PostgreSQL: a pool).

    ``make_leg(db, cache, memories)``: the backend's vector leg (it may use the cache);
    ``cache_folder``: where the search caches are saved on close (``None``: never).
    """

    def __init__(
        self,
        db: DB,
        make_leg: Callable[[DB, IndexCache, Memories], VectorLeg],
        *,
        model: str,
        dimension: int,
        cache_folder: Path | None = None,
    ) -> None:
        self._db = db
        self.model = model
        self.dimension = dimension
        self._store_uuid = ""
        self._closed = False
        self._memories = Memories(db)
        feed = SQLFeed(db, self._memories, lambda: self._store_uuid)
        self._cache = IndexCache(feed, dimension, cache_folder)
        self._vectors = make_leg(db, self._cache, self._memories)
        self._memories.vectors = self._vectors
        self._sessions = Sessions(db)
        self._links = Links(db, self._memories)
        self._turns = Turns(db, self._sessions, self._memories)
        self._turn_records = TurnRecords(db)
        parts = (self._memories, self._links, self._turns)
        self._search = Search(db, self._cache, feed, self._vectors, parts)
        self._upkeep = Maintenance(db, self._memories, self._links, self._cache)

    @property
    def where(self) -> str:
        """The store's location, for messages (a path, or the server without its password)."""
        return self._db.where

    @property
    def store_id(self) -> str:
        """The ``store.uuid`` of the ``meta`` table (read by :meth:`check_model` on open)."""
        return self._store_uuid

    @property
    def db(self) -> DB:
        """The backend's connections (for the backend's own tools and tests)."""
        return self._db

    @property
    def cache(self) -> IndexCache:
        """The search caches (per-owner ANN and BM25 indexes)."""
        return self._cache

    # ------------------------------------------------------------------ open / close
    def check_model(self) -> None:
        """Record the model of a new store, or raise :class:`EmbeddingMismatch` when the store
        was built with another model or dimension (read first: a replica cannot write)."""
        with self._db.read() as q:
            meta: dict[str, str] = {k: v for k, v in q.all("SELECT key, value FROM meta")}
        if "store.uuid" not in meta:  # a new store
            with self._db.transaction(), self._db.write() as q:
                q.many(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                    [
                        ("embedding.model", self.model),
                        ("embedding.dimension", str(self.dimension)),
                        ("store.uuid", new_id()),
                    ],
                )
                meta = {k: v for k, v in q.all("SELECT key, value FROM meta")}
        if (
            meta["embedding.model"] != self.model
            or int(meta["embedding.dimension"]) != self.dimension
        ):
            raise EmbeddingMismatch(
                f"{self.where} was built with embedding model {meta['embedding.model']!r} "
                f"({meta['embedding.dimension']} dims) but is being opened with {self.model!r} "
                f"({self.dimension} dims). Open it with the same [embedding] settings, or switch "
                f"it to the new model with `memlane reembed --model {self.model}`."
            )
        self._store_uuid = meta["store.uuid"]

    def close(self) -> None:
        """Flush buffered access counts, save large search indexes, release the connections.
        Idempotent; any later call raises :class:`~memlane.errors.StoreError`."""
        if self._closed:
            return
        try:
            self._db.flush_access(force=True)
            with self._db.cache_lock():
                self._cache.save(PERSIST_MIN_ROWS)
        finally:
            self._closed = True
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._db.transaction():
            yield

    # ------------------------------------------------------------------ the parts' methods
    insert = forward(Memories.insert, "_memories")
    get = forward(Memories.get, "_memories")
    get_many = forward(Memories.get_many, "_memories")
    find_by_hash = forward(Memories.find_by_hash, "_memories")
    nearest = forward(Memories.nearest, "_memories")
    replace_content = forward(Memories.replace_content, "_memories")
    confirm = forward(Memories.confirm, "_memories")
    set_status = forward(Memories.set_status, "_memories")
    list_memories = forward(Memories.list_memories, "_memories")
    history = forward(Memories.history, "_memories")
    count = forward(Memories.count, "_memories")
    counts = forward(Memories.counts, "_memories")
    agent_counts = forward(Memories.agent_counts, "_memories")
    move_to_project = forward(Memories.move_to_project, "_memories")
    embeddings = forward(Memories.embeddings, "_memories")
    session_memory_ids = forward(Memories.session_memory_ids, "_memories")
    size_bytes = forward(Database.size_bytes, "_db")
    record_access = forward(Database.record_access, "_db")

    add_association = forward(Links.add_association, "_links")
    associations = forward(Links.associations, "_links")
    neighbours = forward(Links.neighbours, "_links")
    log_dedup = forward(Links.log_dedup, "_links")
    dedup_log = forward(Links.dedup_log, "_links")
    dedup_entry = forward(Links.dedup_entry, "_links")
    pending_review = forward(Links.pending_review, "_links")
    set_review_status = forward(Links.set_review_status, "_links")

    merge_memories = forward(Maintenance.merge_memories, "_upkeep")
    purge = forward(Maintenance.purge, "_upkeep")
    restore = forward(Maintenance.restore, "_upkeep")

    vector_search = forward(Search.vector_search, "_search")
    fts_search = forward(Search.fts_search, "_search")
    cosines = forward(Search.cosines, "_search")
    candidate_pairs = forward(Search.candidate_pairs, "_search")
    search_step = forward(Search.search_step, "_search")

    session = forward(Sessions.session, "_sessions")
    reset_session = forward(Sessions.reset_session, "_sessions")
    learned_messages = forward(Sessions.learned_messages, "_sessions")
    set_learned_messages = forward(Sessions.set_learned_messages, "_sessions")
    sessions = forward(Sessions.sessions, "_sessions")
    injection_events = forward(Sessions.injection_events, "_sessions")
    session_turns = forward(TurnRecords.session_turns, "_turn_records")
    record_session_turn = forward(TurnRecords.record_session_turn, "_turn_records")

    turn_context = forward(Turns.turn_context, "_turns")
    start_turn = forward(Turns.start_turn, "_turns")
    finish_turn = forward(Turns.finish_turn, "_turns")
