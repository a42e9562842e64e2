"""Reads of memories in the PostgreSQL store (by id, by hash, lists, history, embeddings,
pinned): a mixin of :class:`~memlane.store.postgres.store.PostgresStore`, which supplies the
connections (:meth:`_use`), the owner lock and :meth:`_require`. Contracts:
:class:`~memlane.store.base.MemoryStore`. Id lists are bound as one array (``= ANY(%s)``), so any
number of ids is one query.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memlane.store.base import Vector
from memlane.store.postgres.rows import MEMORY_COLUMNS, row_to_memory, utc
from memlane.types import ChangeReason, Memory, MemoryType, MemoryVersion, PinnedSort, Status

if TYPE_CHECKING:
    import psycopg


class ReadsMixin:
    """The memory reads of :class:`~memlane.store.base.MemoryStore` over PostgreSQL."""

    if TYPE_CHECKING:

        def _use(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

        def _lock_owner(self, conn: psycopg.Connection[Any], owner: str) -> None: ...

        def _require(
            self, conn: psycopg.Connection[Any], owner: str, memory_id: str
        ) -> tuple[int, Memory]: ...

    def get(self, owner: str, memory_id: str, *, agent: str | None = None) -> Memory | None:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = %s AND owner = %s"
        args: list[Any] = [memory_id, owner]
        if agent is not None:
            sql += " AND (agent = %s OR agent IS NULL)"
            args.append(agent)
        with self._use() as conn:
            row = conn.execute(sql, args).fetchone()
        return None if row is None else row_to_memory(row)

    def _rows_by(
        self, conn: psycopg.Connection[Any], owner: str, column: str, keys: Sequence[Any]
    ) -> Iterator[Sequence[Any]]:
        """Full rows of ``owner`` whose ``column`` (``id`` or ``num``) is among ``keys``."""
        if not keys:
            return iter(())
        cast = "bigint[]" if column == "num" else "text[]"
        return iter(
            conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE owner = %s "
                f"AND {column} = ANY(%s::{cast})",
                (owner, list(keys)),
            ).fetchall()
        )

    def get_many(self, owner: str, ids: Sequence[str]) -> dict[str, Memory]:
        with self._use() as conn:
            rows = list(self._rows_by(conn, owner, "id", list(dict.fromkeys(ids))))
        return {r[1]: row_to_memory(r) for r in rows}

    def find_by_hash(self, owner: str, agent: str | None, content_hash: str) -> Memory | None:
        with self._use() as conn:
            self._lock_owner(conn, owner)  # in a write: wait for the owner's other writers
            agent_sql = "agent IS NULL" if agent is None else "agent = %s"  # see nearest()
            row = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE owner = %s "
                f"AND {agent_sql} AND content_hash = %s AND status = 'active' "
                "ORDER BY created_at, num LIMIT 1",
                (owner, content_hash) if agent is None else (owner, agent, content_hash),
            ).fetchone()
        return None if row is None else row_to_memory(row)

    def list_memories(
        self,
        owner: str,
        *,
        agent: str | None = None,
        type: MemoryType | None = None,
        limit: int = 100,
        status: Status = Status.ACTIVE,
    ) -> list[Memory]:
        where = ["owner = %s", "status = %s"]
        args: list[Any] = [owner, Status(status).value]
        if agent is not None:
            where.append("(agent = %s OR agent IS NULL)")
            args.append(agent)
        if type is not None:
            where.append("type = %s")
            args.append(MemoryType(type).value)
        args.append(int(limit))
        with self._use() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, num DESC LIMIT %s",
                args,
            ).fetchall()
        return [row_to_memory(r) for r in rows]

    def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        with self._use() as conn:
            self._require(conn, owner, memory_id)
            rows = conn.execute(
                "SELECT memory_id, version, content, content_hash, reason, replaced_at "
                "FROM memory_history WHERE memory_id = %s ORDER BY version",
                (memory_id,),
            ).fetchall()
        return [
            MemoryVersion(
                memory_id=r[0],
                version=int(r[1]),
                content=r[2],
                content_hash=r[3],
                reason=ChangeReason(r[4]),
                replaced_at=utc(r[5]),  # type: ignore[arg-type]
            )
            for r in rows
        ]

    def count(self, owner: str | None = None) -> int:
        with self._use() as conn:
            if owner is None:
                row = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'")
            else:
                row = conn.execute(
                    "SELECT count(*) FROM memories WHERE owner = %s AND status = 'active'",
                    (owner,),
                )
            return int(row.fetchone()[0])  # type: ignore[index]

    def counts(self, owner: str | None = None) -> list[tuple[str, str, str, int]]:
        """``(owner, type, status, n)`` for every group of memories (of ``owner`` when given)."""
        sql = "SELECT owner, type, status, count(*) FROM memories"
        args: tuple[str, ...] = ()
        if owner is not None:
            sql, args = sql + " WHERE owner = %s", (owner,)
        with self._use() as conn:
            rows = conn.execute(sql + " GROUP BY owner, type, status", args).fetchall()
        return [(str(o), str(t), str(s), int(n)) for o, t, s, n in rows]

    def size_bytes(self) -> int:
        with self._use() as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0

    def embeddings(self, owner: str, ids: Sequence[str]) -> dict[str, Vector]:
        if not ids:
            return {}
        with self._use() as conn:
            rows = conn.execute(
                "SELECT id, embedding FROM memories WHERE owner = %s AND id = ANY(%s::text[])",
                (owner, list(dict.fromkeys(ids))),
                binary=True,  # vectors as float32 bytes, not text to parse
            ).fetchall()
        return dict(rows)

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        return {mid: float(vec @ vector) for mid, vec in self.embeddings(owner, ids).items()}

    def pinned(
        self,
        owner: str,
        agent: str | None,
        types: Sequence[MemoryType],
        limit: int,
        sort: PinnedSort,
    ) -> list[Memory]:
        if not types or limit <= 0:
            return []
        order = (
            "importance DESC, created_at DESC"
            if PinnedSort(sort) is PinnedSort.IMPORTANCE
            else "created_at DESC"
        )
        wanted = list(dict.fromkeys(MemoryType(t).value for t in types))
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE owner = %s AND status = 'active' "
            "AND type = ANY(%s::text[])"
        )
        args: list[Any] = [owner, wanted]
        if agent is not None:
            sql += " AND (agent = %s OR agent IS NULL)"
            args.append(agent)
        args.append(int(limit))
        with self._use() as conn:
            rows = conn.execute(sql + f" ORDER BY {order} LIMIT %s", args).fetchall()
        return [row_to_memory(r) for r in rows]
