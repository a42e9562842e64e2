"""What a backend supplies besides its :class:`~memlane.store.sql.dialect.Dialect`: its
connections and transactions (:class:`Database`) and its vector leg (:class:`VectorLeg`). The
parts of :mod:`memlane.store.sql` receive a ``Database`` and never another part's state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from memlane.store.base import ScoredId, Vector
from memlane.store.records import VectorAsk
from memlane.store.sql.dialect import Dialect, Q
from memlane.types import Memory

#: Flush buffered access counts when this many (owner, id) are buffered, or the oldest is this
#: many seconds old.
ACCESS_FLUSH_EVERY = 256
ACCESS_FLUSH_SECONDS = 5.0


class Database(Protocol):
    """A backend's connections, as the parts of the store use them.

    Transactions follow :mod:`memlane.store.base`: one write transaction per engine call,
    joined by nested blocks; reads inside it see its writes. Every context manager here may
    raise the driver's errors (the store's public methods translate them).
    """

    @property
    def dialect(self) -> Dialect:
        """The backend's SQL differences."""
        ...

    #: The store's location for messages (a path, or the server without its password).
    where: str
    #: SQL of the next change number of ``memories`` (its parameters: :meth:`seq_args`).
    seq_sql: str

    def read(self) -> AbstractContextManager[Q]:
        """A handle for reads: the open transaction's (this thread's) when there is one, so that
        reads see its writes; else one that sees every committed row."""
        ...

    def write(self) -> AbstractContextManager[Q]:
        """The open transaction's handle; :class:`~memlane.errors.StoreError` outside one."""
        ...

    def committed(self) -> AbstractContextManager[Q]:
        """A handle that sees committed rows (the search caches' feed; inside a write
        transaction the feed bounds itself with :meth:`feed_bound`)."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction (nested calls join the outer one)."""
        ...

    def in_transaction(self) -> bool:
        """Whether this thread has a write transaction open."""
        ...

    def lock_owner(self, q: Q, owner: str) -> None:
        """In a write transaction, serialise ``owner``'s writers (once; held to the commit).
        SQLite: nothing (its write lock is whole-database)."""
        ...

    def seq_args(self) -> list[Any]:
        """The parameters of :attr:`seq_sql` for the next change (in a write transaction;
        SQLite: the number itself, PostgreSQL: none, a sequence numbers it)."""
        ...

    def feed_bound(self, q: Q) -> int | None:
        """The highest change number the feed may read (``None``: no bound). SQLite, inside a
        write transaction: the last one committed before it."""
        ...

    def cache_lock(self) -> AbstractContextManager[Any]:
        """The lock the search caches are used under (they are not thread-safe)."""
        ...

    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        """Buffer access counts (see :class:`AccessBuffer`), flushed the backend's way."""
        ...

    def flush_access(self, *, force: bool = False) -> None:
        """Write buffered access counts now (``force``) or when they are due."""
        ...

    def translate(self, exc: BaseException, operation: str, waited_s: float) -> Exception:
        """The memlane error for a driver error raised by ``operation``."""
        ...

    def prepare_purge(self) -> None:
        """Before a purge's transaction (SQLite: ``secure_delete`` on, freed pages zeroed)."""
        ...

    def purge_statements(self) -> list[str]:
        """Statements that end a purge's transaction (SQLite: the FTS5 index rebuilt, so no old
        segment keeps a purged token)."""
        ...

    def after_purge(self) -> None:
        """After a purge committed (SQLite: the WAL checkpointed and truncated: its frames held
        copies of the purged rows)."""
        ...

    def size_bytes(self) -> int:
        """Bytes the store takes on disk."""
        ...

    def close(self) -> None:
        """Release the connections (idempotent); later use raises
        :class:`~memlane.errors.StoreError`."""
        ...


class VectorLeg(Protocol):
    """The backend's nearest-neighbour search over ``memories.embedding``."""

    #: Whether it searches in process (the search caches' ANN index) rather than in SQL.
    in_process: bool

    def search_sql(self, ask: VectorAsk) -> tuple[str, list[Any]] | None:
        """:meth:`search` as one statement for a batch, whose rows are a memory row
        (:data:`~memlane.store.sql.rows.MEMORY_COLUMNS`), its embedding and its cosine distance,
        nearest first (near-sorted); ``None`` for a leg that searches in process (the caller
        then uses the search caches)."""
        ...

    def nearest(
        self, q: Q, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        """:meth:`~memlane.store.base.MemoryStore.nearest` on ``q`` (the transaction's
        handle when one is open: its own rows included)."""
        ...

    def search(self, ask: VectorAsk) -> list[ScoredId]:
        """:meth:`~memlane.store.base.MemoryStore.vector_search` of ``ask`` (committed rows)."""
        ...

    def written(self, owner: str, num: int, agent: str | None, vector: Vector) -> None:
        """Row ``num`` got ``vector`` in the open transaction (an in-process index notes it
        for :meth:`nearest`; a SQL leg sees it anyway)."""
        ...


class AccessBuffer:
    """Buffered access counts: ``(owner, id) -> (count, last time)``, thread-safe. A backend
    takes them out to write (:meth:`take`) and puts back what it could not (:meth:`put_back`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], tuple[int, Any]] = {}
        self._since = time.monotonic()

    def add(self, owner: str, ids: Sequence[str], now: Any) -> None:
        """Count one access of each of ``ids`` at ``now``."""
        with self._lock:
            for mid in ids:
                count, _ = self._counts.get((owner, mid), (0, now))
                self._counts[(owner, mid)] = (count + 1, now)

    def take(
        self, *, force: bool = False, due: bool = False
    ) -> dict[tuple[str, str], tuple[int, Any]]:
        """The buffered counts, emptied, when ``force``, ``due``, or the buffer is full or old
        (:data:`ACCESS_FLUSH_EVERY`, :data:`ACCESS_FLUSH_SECONDS`); else ``{}``."""
        with self._lock:
            if not self._counts:
                self._since = time.monotonic()
                return {}
            due = (
                force
                or due
                or len(self._counts) >= ACCESS_FLUSH_EVERY
                or time.monotonic() - self._since >= ACCESS_FLUSH_SECONDS
            )
            if not due:
                return {}
            taken, self._counts = self._counts, {}
            self._since = time.monotonic()
            return taken

    def put_back(self, taken: dict[tuple[str, str], tuple[int, Any]]) -> None:
        """Counts that were not written: added to what was buffered since."""
        if not taken:
            return
        with self._lock:
            for key, (count, ts) in taken.items():
                old, old_ts = self._counts.get(key, (0, ts))
                self._counts[key] = (old + count, max(ts, old_ts))
