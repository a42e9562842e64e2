"""The change feed of the search caches (:class:`~memlane.store.index_cache.ChangeFeed`), written
once over the ``memories`` table of every backend.

Changes are numbered by the dialect's change column (SQLite ``vec_seq``, PostgreSQL
``change_seq``), bumped on every insert, re-embed, text change or status change. The numbers are
gap-free below what the feed returns: on SQLite writers number their changes on from the highest
committed one while they hold the write lock; on PostgreSQL every change of an owner happens
under that owner's advisory lock (:mod:`memlane.store.postgres.database`). Reads go through
:meth:`~memlane.store.sql.database.Database.committed`: rows of a write transaction open in this
process (which a rollback could take back) are never returned, except by :meth:`SQLFeed.memories`.

Hard deletes (:func:`~memlane.store.sql.purge.purge`) leave no row to read: each one leaves its
owner's *purge mark* in ``purge_marks`` (the owner's :func:`owner_key`, and a change number of
the same sequence), and the feed returns a mark above the watermark as a change of key
:data:`~memlane.store.index_cache.PURGED` among the rows (the caches then rebuild from the rows
left: issue #33, "purge means gone, whatever runs").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from memlane.store.index_cache import PURGED, RowRef, TextChange, VectorChange
from memlane.store.sql.database import Database
from memlane.store.sql.memories import Memories
from memlane.types import Memory


def owner_key(owner: str) -> str:
    """The key of ``owner``'s row in ``purge_marks``: the SHA-256 of its name, hex (a purged
    owner's name is not kept)."""
    return hashlib.sha256(owner.encode("utf-8")).hexdigest()


def mark_purge_sql(db: Database, owner: str) -> tuple[str, list[Any]]:
    """The statement that records a purge of ``owner``'s rows (in the purge's transaction, under
    the owner's writer lock: its change number is the owner's next, like a row's)."""
    sql = (
        f"INSERT INTO purge_marks (owner_key, seq) VALUES (?, {db.seq_sql}) "
        "ON CONFLICT (owner_key) DO UPDATE SET seq = excluded.seq"
    )
    return sql, [owner_key(owner), *db.seq_args()]


class SQLFeed:
    """The change feed of one store (reads only); called under the cache lock."""

    def __init__(self, db: Database, memories: Memories, store_id: Callable[[], str]) -> None:
        self.db = db
        self._memories = memories
        self._store_id = store_id

    def store_id(self) -> str:
        """The ``store.uuid`` of the ``meta`` table (set when the store was created)."""
        return self._store_id()

    def _changes(self, owner: str, watermark: int, columns: str) -> tuple[list[Any], int]:
        """Rows of ``owner`` changed since ``watermark`` (``num, active, <columns>``, in change
        order) and the new watermark: one read, usually of no row. Inside a SQLite write
        transaction, only rows committed before it began, and the watermark moves up to that
        point: no committed row can lie between, so later catch-ups in the same transaction
        read nothing at all."""
        with self.db.committed() as q:
            upto = self.db.feed_bound(q)
            if upto is not None and upto <= watermark:
                return [], watermark
            sql, args = self.changes_sql(owner, watermark, columns, upto)
            rows = q.all(sql, args)
        return self.changed(rows, watermark, upto)

    def changes_sql(
        self, owner: str, watermark: int, columns: str, upto: int | None = None
    ) -> tuple[str, list[Any]]:
        """The statement of :meth:`_changes` (``upto``: the feed's bound, if any), for a batch
        (:class:`~memlane.store.sql.step.SQLSearchStep` sends it with other reads). The owner's
        purge mark, when above ``watermark``, comes as a row of key
        :data:`~memlane.store.index_cache.PURGED` (not active, no columns)."""
        seq = self.db.dialect.seq_column
        bound = "" if upto is None else f" AND {seq} <= ?"
        mark_bound = "" if upto is None else " AND seq <= ?"
        nulls = ", ".join("NULL" for _ in columns.split(","))
        sql = (
            f"SELECT num, status = 'active', {columns}, {seq} AS feed_seq FROM memories "
            f"WHERE owner = ? AND {seq} > ?{bound} "
            f"UNION ALL SELECT {PURGED}, 1 = 0, {nulls}, seq FROM purge_marks "
            f"WHERE owner_key = ? AND seq > ?{mark_bound} ORDER BY feed_seq"
        )
        extra = [] if upto is None else [upto]
        args: list[Any] = [owner, watermark, *extra, owner_key(owner), watermark, *extra]
        return sql, args

    @staticmethod
    def changed(
        rows: Sequence[Sequence[Any]], watermark: int, upto: int | None = None
    ) -> tuple[list[Any], int]:
        """The rows of :meth:`changes_sql` without their change number, and the new watermark."""
        if upto is not None:
            watermark = upto
        elif rows:
            watermark = int(rows[-1][-1])
        return [tuple(r[:-1]) for r in rows], watermark

    #: The columns each index's changes carry (after ``num, active``).
    VECTOR_COLUMNS = "embedding"
    TEXT_COLUMNS = "content, agent, type, project"

    def vector_changes(self, owner: str, watermark: int) -> tuple[list[VectorChange], int]:
        return self.vector_rows(*self._changes(owner, watermark, self.VECTOR_COLUMNS))

    def vector_rows(self, rows: list[Any], mark: int) -> tuple[list[VectorChange], int]:
        """:meth:`changed` rows of the vector columns as the vector index takes them."""
        vec = self.db.dialect.vec_out
        return [
            (int(n), bool(a), b"" if n == PURGED else vec(v).tobytes()) for n, a, v in rows
        ], mark

    def text_changes(self, owner: str, watermark: int) -> tuple[list[TextChange], int]:
        return self.text_rows(*self._changes(owner, watermark, self.TEXT_COLUMNS))

    @staticmethod
    def text_rows(rows: list[Any], mark: int) -> tuple[list[TextChange], int]:
        """:meth:`changed` rows of the text columns as the BM25 index takes them."""
        return [(int(n), bool(a), c, ag, t, p) for n, a, c, ag, t, p in rows], mark

    def row_refs(self, owner: str, keys: Sequence[int]) -> dict[int, RowRef]:
        d = self.db.dialect
        out: dict[int, RowRef] = {}
        with self.db.committed() as q:
            for cond, args in d.in_lists("num", keys, "bigint"):
                for num, mid, agent, mtype, active, project in q.all(
                    f"SELECT num, id, agent, type, status = 'active', project FROM memories "
                    f"WHERE {d.owner_filter} = ? AND {cond}",
                    [owner, *args],
                ):
                    out[int(num)] = RowRef(mid, agent, mtype, bool(active), project)
        return out

    def memories(self, owner: str, keys: Sequence[int]) -> dict[int, Memory]:
        with self.db.read() as q:  # the open transaction's rows included
            found = self._memories.by_keys(q, owner, "num", keys)
        return {num: mem for num, (_, mem) in found.items()}

    def purged_after(self, owner: str, watermark: int) -> bool:
        """Whether ``owner``'s rows were purged after change ``watermark`` (committed)."""
        with self.db.committed() as q:
            row = q.one(
                "SELECT 1 FROM purge_marks WHERE owner_key = ? AND seq > ?",
                (owner_key(owner), watermark),
            )
        return row is not None

    def keys(self, owner: str) -> set[int]:
        """The keys of every row of ``owner`` (any status, committed)."""
        with self.db.committed() as q:
            return {int(r[0]) for r in q.all("SELECT num FROM memories WHERE owner = ?", (owner,))}

    def has_agent_scopes(self, owner: str) -> bool:
        with self.db.committed() as q:
            row = q.one(
                "SELECT 1 FROM memories WHERE owner = ? AND agent IS NOT NULL LIMIT 1", (owner,)
            )
        return row is not None
