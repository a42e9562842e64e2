"""Reads of memories in the SQLite store (by id, by hash, lists, history, embeddings, pinned):
a mixin of :class:`~memlane.store.sqlite.store.SQLiteStore`, which supplies the connection, the
lock and :meth:`_require`. Contracts: :class:`~memlane.store.base.MemoryStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memlane._ids import from_iso
from memlane.store.base import Vector, iter_chunks
from memlane.store.sqlite.rows import MEMORY_COLUMNS, row_to_memory
from memlane.types import ChangeReason, Memory, MemoryType, MemoryVersion, PinnedSort, Status

if TYPE_CHECKING:
    import sqlite3
    import threading


class ReadsMixin:
    """The memory reads of :class:`~memlane.store.base.MemoryStore` over SQLite."""

    if TYPE_CHECKING:
        _conn: sqlite3.Connection
        _lock: threading.RLock

        def _fetch_one(self, where: str, args: Sequence[Any]) -> tuple[int, Memory] | None: ...

        def _require(self, owner: str, memory_id: str) -> tuple[int, Memory]: ...

    def get(self, owner: str, memory_id: str, *, agent: str | None = None) -> Memory | None:
        where, args = "id = ? AND owner = ?", [memory_id, owner]
        if agent is not None:
            where += " AND (agent = ? OR agent IS NULL)"
            args.append(agent)
        with self._lock:
            found = self._fetch_one(where, args)
            return None if found is None else found[1]

    def _get_many(
        self, owner: str, column: str, keys: Sequence[Any]
    ) -> dict[Any, tuple[int, Memory]]:
        # "+owner": the unary plus keeps SQLite's planner off the owner indexes. Without it,
        # an IN list of 3 keys or more is read by walking every row of the owner (measured at
        # 100,000 memories: 100 ms for 3 ids, against 0.2 ms by the key's own index); the
        # owner test stays, as a filter on the rows the key found (also in feed.row_refs and
        # embeddings below).
        out: dict[Any, tuple[int, Memory]] = {}
        for chunk in iter_chunks(keys):
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE +owner = ? AND {column} IN ({marks})",
                [owner, *chunk],
            ):
                mem = row_to_memory(row)
                out[row[0] if column == "num" else mem.id] = (int(row[0]), mem)
        return out

    def get_many(self, owner: str, ids: Sequence[str]) -> dict[str, Memory]:
        with self._lock:
            found = self._get_many(owner, "id", list(dict.fromkeys(ids)))
            return {k: v[1] for k, v in found.items()}

    def find_by_hash(self, owner: str, agent: str | None, content_hash: str) -> Memory | None:
        with self._lock:
            # INDEXED BY: without it SQLite walks the (owner, status, created_at) index for the
            # ORDER BY, a scan of every memory of the owner (tens of ms at 100k).
            row = self._conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories INDEXED BY memories_scope_hash "
                "WHERE owner = ? AND agent IS ? AND content_hash = ? AND status = 'active' "
                "ORDER BY created_at LIMIT 1",
                (owner, agent, content_hash),
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
        where = ["owner = ?", "status = ?"]
        args: list[Any] = [owner, Status(status).value]
        if agent is not None:
            where.append("(agent = ? OR agent IS NULL)")
            args.append(agent)
        if type is not None:
            where.append("type = ?")
            args.append(MemoryType(type).value)
        args.append(int(limit))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, num DESC LIMIT ?",
                args,
            ).fetchall()
            return [row_to_memory(r) for r in rows]

    def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        with self._lock:
            self._require(owner, memory_id)
            return [
                MemoryVersion(
                    memory_id=r[0],
                    version=int(r[1]),
                    content=r[2],
                    content_hash=r[3],
                    reason=ChangeReason(r[4]),
                    replaced_at=from_iso(r[5]),  # type: ignore[arg-type]
                )
                for r in self._conn.execute(
                    "SELECT memory_id, version, content, content_hash, reason, replaced_at "
                    "FROM memory_history WHERE memory_id = ? ORDER BY version",
                    (memory_id,),
                )
            ]

    def count(self, owner: str | None = None) -> int:
        with self._lock:
            if owner is None:
                row = self._conn.execute("SELECT count(*) FROM memories WHERE status = 'active'")
            else:
                row = self._conn.execute(
                    "SELECT count(*) FROM memories WHERE owner = ? AND status = 'active'", (owner,)
                )
            return int(row.fetchone()[0])

    def counts(self, owner: str | None = None) -> list[tuple[str, str, str, int]]:
        """``(owner, type, status, n)`` for every group of memories (of ``owner`` when given)."""
        sql = "SELECT owner, type, status, count(*) FROM memories"
        args: tuple[str, ...] = ()
        if owner is not None:
            sql, args = sql + " WHERE owner = ?", (owner,)
        with self._lock:
            rows = self._conn.execute(sql + " GROUP BY owner, type, status", args).fetchall()
        return [(str(o), str(t), str(s), int(n)) for o, t, s, n in rows]

    def size_bytes(self) -> int:
        path: Path = self.path  # type: ignore[attr-defined]
        files = (path, path.with_name(path.name + "-wal"))
        return sum(p.stat().st_size for p in files if p.exists())

    def embeddings(self, owner: str, ids: Sequence[str]) -> dict[str, Vector]:
        # Straight from the rows: current (another process may have re-embedded one), inactive
        # ones and this transaction's included, and faster than the ANN index's copies.
        out: dict[str, Vector] = {}
        with self._lock:
            for chunk in iter_chunks(ids):
                marks = ",".join("?" * len(chunk))
                for mid, blob in self._conn.execute(
                    f"SELECT id, embedding FROM memories WHERE +owner = ? AND id IN ({marks})",
                    [owner, *chunk],
                ):
                    out[mid] = np.frombuffer(blob, dtype=np.float32)
        return out

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
        # distinct type values: an IN list bounded by the enum's size, whatever the caller passed
        wanted = list(dict.fromkeys(MemoryType(t).value for t in types))
        args: list[Any] = [owner, *wanted]
        agent_sql = ""
        if agent is not None:
            agent_sql = " AND (agent = ? OR agent IS NULL)"
            args.append(agent)
        args.append(int(limit))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE owner = ? AND status = 'active' "
                f"AND type IN ({','.join('?' * len(wanted))}){agent_sql} ORDER BY {order} LIMIT ?",
                args,
            ).fetchall()
            return [row_to_memory(r) for r in rows]
