"""The SQLite side of the search caches: :class:`~memlane.store.index_cache.ChangeFeed` over the
``memories`` table of a :class:`~memlane.store.sqlite.store.SQLiteStore`.

The change sequence is ``vec_seq``, bumped on every insert, re-embed or status change. Writers
number their changes on from the highest committed ``vec_seq`` while they hold the write lock
(``BEGIN IMMEDIATE``), so committed rows never leave a gap below the last one read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlane.store.base import iter_chunks
from memlane.store.index_cache import RowRef, TextChange, VectorChange
from memlane.types import Memory

if TYPE_CHECKING:
    from memlane.store.sqlite.store import SQLiteStore

#: Upper ``vec_seq`` bound of a catch-up outside a write transaction (SQLite's largest integer).
NO_BOUND = 2**63 - 1


class SQLiteFeed:
    """The change feed of one store; called under the store's lock (reads only)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def store_id(self) -> str:
        """The ``store.uuid`` of the ``meta`` table (set when the store was created)."""
        return self._store._store_uuid

    def vector_changes(self, owner: str, watermark: int) -> tuple[list[VectorChange], int]:
        return self._changes(owner, watermark, "embedding")

    def text_changes(self, owner: str, watermark: int) -> tuple[list[TextChange], int]:
        return self._changes(owner, watermark, "content, agent, type")

    def _changes(self, owner: str, watermark: int, columns: str) -> tuple[list[Any], int]:
        """Rows of ``owner`` changed since ``watermark`` (``num, active, <columns>``, in
        ``vec_seq`` order) and the new watermark: one read, usually of no row.

        Inside a write transaction, only rows committed before it began (never its own, which a
        rollback could take back), and the watermark moves up to that point: no committed row
        can lie between, so later catch-ups in the same transaction read nothing at all."""
        store = self._store
        upto = store._tx_base() if store._depth else NO_BOUND
        if upto <= watermark:
            return [], watermark
        rows = store._conn.execute(
            f"SELECT num, status = 'active', {columns}, vec_seq FROM memories "
            "WHERE owner = ? AND vec_seq > ? AND vec_seq <= ? ORDER BY vec_seq",
            (owner, watermark, upto),
        ).fetchall()
        if store._depth:
            watermark = upto
        elif rows:
            watermark = int(rows[-1][-1])
        return [r[:-1] for r in rows], watermark  # (num, 0 or 1, ...)

    def row_refs(self, owner: str, keys: Sequence[int]) -> dict[int, RowRef]:
        out: dict[int, RowRef] = {}
        for chunk in iter_chunks(keys):
            for num, mid, agent, mtype, active in self._store._conn.execute(
                "SELECT num, id, agent, type, status = 'active' FROM memories WHERE +owner = ? "
                f"AND num IN ({','.join('?' * len(chunk))})",
                [owner, *chunk],
            ):
                out[int(num)] = RowRef(mid, agent, mtype, bool(active))
        return out

    def memories(self, owner: str, keys: Sequence[int]) -> dict[int, Memory]:
        return {num: mem for num, (_, mem) in self._store._get_many(owner, "num", keys).items()}

    def has_agent_scopes(self, owner: str) -> bool:
        row = self._store._conn.execute(
            "SELECT 1 FROM memories WHERE owner = ? AND agent IS NOT NULL LIMIT 1", (owner,)
        ).fetchone()
        return row is not None
