"""The PostgreSQL side of the BM25 caches: :class:`~memlane.store.index_cache.ChangeFeed` over
the ``memories`` table of a :class:`~memlane.store.postgres.store.PostgresStore`.

The change sequence is ``change_seq`` (from the ``memories_change_seq`` sequence), bumped on
every insert, re-embed, text change or status change, always under the owner's advisory lock;
why that makes it gap-free per owner is in :mod:`memlane.store.postgres.store`. Every read here
goes through the feed's own autocommit connection, so it sees committed rows only, never the
rows of a write transaction open in this process (which a rollback could take back). Called
under the store's cache lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlane.store.index_cache import RowRef, TextChange, VectorChange
from memlane.store.postgres.rows import MEMORY_COLUMNS, row_to_memory
from memlane.types import Memory

if TYPE_CHECKING:
    from memlane.store.postgres.store import PostgresStore


class PostgresFeed:
    """The change feed of one store (reads only, committed rows only)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def store_id(self) -> str:
        """The ``store.uuid`` of the ``meta`` table (set when the database was created)."""
        return self._store._store_uuid

    def _changes(self, owner: str, watermark: int, columns: str) -> tuple[list[Any], int]:
        rows = (
            self._store._feed()
            .execute(
                f"SELECT num, status = 'active', {columns}, change_seq FROM memories "
                "WHERE owner = %s AND change_seq > %s ORDER BY change_seq",
                (owner, watermark),
            )
            .fetchall()
        )
        if rows:
            watermark = int(rows[-1][-1])
        return [tuple(r[:-1]) for r in rows], watermark

    def vector_changes(self, owner: str, watermark: int) -> tuple[list[VectorChange], int]:
        rows, mark = self._changes(owner, watermark, "embedding")
        out = [(int(n), bool(a), v.tobytes()) for n, a, v in rows]
        return out, mark

    def text_changes(self, owner: str, watermark: int) -> tuple[list[TextChange], int]:
        rows, mark = self._changes(owner, watermark, "content, agent, type")
        return [(int(n), bool(a), c, ag, t) for n, a, c, ag, t in rows], mark

    def row_refs(self, owner: str, keys: Sequence[int]) -> dict[int, RowRef]:
        if not keys:
            return {}
        rows = (
            self._store._feed()
            .execute(
                "SELECT num, id, agent, type, status = 'active' FROM memories "
                "WHERE owner = %s AND num = ANY(%s::bigint[])",
                (owner, list(keys)),
            )
            .fetchall()
        )
        return {int(n): RowRef(mid, agent, mtype, bool(a)) for n, mid, agent, mtype, a in rows}

    def memories(self, owner: str, keys: Sequence[int]) -> dict[int, Memory]:
        if not keys:
            return {}
        with self._store._use() as conn:  # the open transaction's rows included
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE owner = %s "
                "AND num = ANY(%s::bigint[])",
                (owner, list(keys)),
            ).fetchall()
        return {int(r[0]): row_to_memory(r) for r in rows}

    def has_agent_scopes(self, owner: str) -> bool:
        row = (
            self._store._feed()
            .execute(
                "SELECT 1 FROM memories WHERE owner = %s AND agent IS NOT NULL LIMIT 1", (owner,)
            )
            .fetchone()
        )
        return row is not None
