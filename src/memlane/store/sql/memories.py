"""The ``memories`` rows, written once for every backend: reads by id, hash, list and scope,
and the writes (insert, new text, confirm, status) with their history. Contracts:
:class:`~memlane.store.base.MemoryStore`; rules (scope, transactions) in :mod:`memlane.store.base`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from memlane._ids import utcnow
from memlane.errors import NotFound
from memlane.store.base import NewMemory, Vector
from memlane.store.metadata import merge_metadata
from memlane.store.records import Confirmation, ContentChange, MemoryFilter
from memlane.store.sql.database import Database, VectorLeg
from memlane.store.sql.dialect import Q
from memlane.store.sql.rows import MEMORY_COLUMNS, VERSION_COLUMNS, Rows
from memlane.types import ChangeReason, Memory, MemoryType, MemoryVersion, PinnedSort, Status

#: A status change; a memory superseded gets its ``valid_to`` time (params: status, now,
#: status, now, the change number's, num).
_SET_STATUS = (
    "UPDATE memories SET status = ?, updated_at = ?, valid_to = CASE WHEN ? = 'superseded' "
    "THEN ? ELSE valid_to END, {seq} = {next} WHERE num = ? RETURNING " + MEMORY_COLUMNS
)


def dumps(value: Mapping[str, Any] | Sequence[Any]) -> str:
    """JSON text of a metadata mapping or a list (both backends take JSON as text)."""
    return json.dumps(value if isinstance(value, list) else dict(value), ensure_ascii=False)  # type: ignore[arg-type]


def scope_sql(owner: str, agent: str | None, project: str | None = None) -> tuple[str, list[Any]]:
    """``WHERE`` of ``owner``'s rows visible to ``agent`` (``None``: all the owner's) in
    ``project`` (``None``: every project's; else that project's and the global ones)."""
    where, args = "owner = ?", [owner]
    if agent is not None:
        where, args = where + " AND (agent = ? OR agent IS NULL)", [*args, agent]
    if project is not None:
        where, args = where + " AND (project = ? OR project IS NULL)", [*args, project]
    return where, args


def exact_agent_sql(agent: str | None) -> tuple[str, list[Any]]:
    """``agent`` exactly: ``agent IS NULL`` or ``agent = ?``, never ``IS NOT DISTINCT FROM``
    (PostgreSQL's planner estimates one row for that and scans every memory instead of its
    indexes: at 25,000 memories 23.7 ms against 1.2 ms a call)."""
    return ("agent IS NULL", []) if agent is None else ("agent = ?", [agent])


def exact_project_sql(project: str | None) -> tuple[str, list[Any]]:
    """``project`` exactly (``None``: the global rows), as :func:`exact_agent_sql`."""
    return ("project IS NULL", []) if project is None else ("project = ?", [project])


class Memories:
    """Reads and writes of memory rows over one :class:`Database`."""

    def __init__(self, db: Database, vectors: VectorLeg | None = None) -> None:
        self.db = db
        #: The backend's vector leg (set by the store once built: it may read through this part).
        self.vectors: VectorLeg = vectors  # type: ignore[assignment]
        self.rows = Rows(db.dialect)
        d = db.dialect
        self._set_status = _SET_STATUS.format(seq=d.seq_column, next=db.seq_sql)

    # ------------------------------------------------------------------ helpers (a handle)
    def fetch(self, q: Q, where: str, args: Sequence[Any]) -> tuple[int, Memory] | None:
        """The first row matching ``where``: ``(num, memory)`` or ``None``."""
        row = q.one(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where}", args)
        return None if row is None else (int(row[0]), self.rows.memory(row))

    def require(self, q: Q, owner: str, memory_id: str) -> tuple[int, Memory]:
        """The row of ``owner``'s memory ``memory_id``; :class:`NotFound` (the same message as
        for a missing id) when it does not exist or is another owner's."""
        found = self.fetch(q, "id = ? AND owner = ?", (memory_id, owner))
        if found is None:
            raise NotFound(f"no memory with id {memory_id!r} for owner {owner!r}")
        return found

    def by_keys(
        self, q: Q, owner: str, column: str, keys: Sequence[Any]
    ) -> dict[Any, tuple[int, Memory]]:
        """``{key: (num, memory)}`` of ``owner``'s rows whose ``column`` (``id`` or ``num``) is
        among ``keys``; any number of keys."""
        kind = "bigint" if column == "num" else "text"
        out: dict[Any, tuple[int, Memory]] = {}
        of = self.db.dialect.owner_filter
        for cond, args in self.db.dialect.in_lists(column, keys, kind):
            for row in q.all(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {of} = ? AND {cond}", [owner, *args]
            ):
                mem = self.rows.memory(row)
                out[int(row[0]) if column == "num" else mem.id] = (int(row[0]), mem)
        return out

    def add_history(self, q: Q, old: Memory, reason: ChangeReason) -> None:
        """``old``'s text as the next version of ``old.id``'s history."""
        q.run(
            "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, "
            "replaced_at) SELECT ?, coalesce(max(version), 0) + 1, ?, ?, ?, ? "
            "FROM memory_history WHERE memory_id = ?",
            (
                old.id,
                old.content,
                old.content_hash,
                ChangeReason(reason).value,
                self.db.dialect.time_in(utcnow()),
                old.id,
            ),
        )

    def set_status_row(self, q: Q, num: int, status: Status) -> Memory:
        """Set row ``num``'s status (and its ``valid_to`` when superseded); the row after."""
        now = self.db.dialect.time_in(utcnow())
        value = Status(status).value
        row = q.all(self._set_status, (value, now, value, now, *self.db.seq_args(), num))
        return self.rows.memory(row[0])

    # ------------------------------------------------------------------ reads
    def get(self, owner: str, memory_id: str, *, agent: str | None = None) -> Memory | None:
        where, args = scope_sql(owner, agent)
        with self.db.read() as q:
            found = self.fetch(q, f"id = ? AND {where}", [memory_id, *args])
        return None if found is None else found[1]

    def get_many(self, owner: str, ids: Sequence[str]) -> dict[str, Memory]:
        with self.db.read() as q:
            found = self.by_keys(q, owner, "id", list(dict.fromkeys(ids)))
        return {k: v[1] for k, v in found.items()}

    def find_by_hash(
        self, owner: str, agent: str | None, content_hash: str, *, project: str | None = None
    ) -> Memory | None:
        agent_sql, agent_args = exact_agent_sql(agent)
        project_sql, project_args = exact_project_sql(project)
        with self.db.read() as q:
            self.db.lock_owner(q, owner)  # in a write: wait for the owner's other writers
            row = q.one(
                f"SELECT {MEMORY_COLUMNS} FROM memories {self.db.dialect.hash_hint} "
                f"WHERE owner = ? AND {agent_sql} AND content_hash = ? AND status = 'active' "
                f"AND {project_sql} ORDER BY created_at, num LIMIT 1",
                [owner, *agent_args, content_hash, *project_args],
            )
        return None if row is None else self.rows.memory(row)

    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        with self.db.read() as q:
            self.db.lock_owner(q, owner)
            return self.vectors.nearest(q, owner, agent, vector, k)

    def list_memories(self, /, owner: str, **filters: Any) -> list[Memory]:
        """``filters``: the contract's keyword arguments, as the record :class:`MemoryFilter`."""
        wanted = MemoryFilter(**filters)
        where, args = scope_sql(owner, wanted.agent, wanted.project)
        where += " AND status = ?"
        args.append(Status(wanted.status).value)
        if wanted.type is not None:
            where += " AND type = ?"
            args.append(MemoryType(wanted.type).value)
        with self.db.read() as q:
            rows = q.all(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where} "
                "ORDER BY created_at DESC, num DESC LIMIT ?",
                [*args, int(wanted.limit)],
            )
        return [self.rows.memory(r) for r in rows]

    def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        with self.db.read() as q:
            self.require(q, owner, memory_id)
            rows = q.all(
                f"SELECT {VERSION_COLUMNS} FROM memory_history WHERE memory_id = ? ORDER BY version",
                (memory_id,),
            )
        return [self.rows.version(r) for r in rows]

    def count(self, owner: str | None = None) -> int:
        sql, args = "SELECT count(*) FROM memories WHERE status = 'active'", []
        if owner is not None:
            sql, args = sql + " AND owner = ?", [owner]
        with self.db.read() as q:
            row = q.one(sql, args)
        return int(row[0]) if row else 0

    def agent_counts(self) -> list[tuple[str, str | None, int]]:
        """``(owner, agent, n)``: active memories per owner and agent."""
        with self.db.read() as q:
            rows = q.all(
                "SELECT owner, agent, count(*) FROM memories WHERE status = 'active' "
                "GROUP BY owner, agent ORDER BY owner, agent"
            )
        return [(str(r[0]), r[1], int(r[2])) for r in rows]

    def counts(self, owner: str | None = None) -> list[tuple[str, str, str, int]]:
        sql, args = "SELECT owner, type, status, count(*) FROM memories", []
        if owner is not None:
            sql, args = sql + " WHERE owner = ?", [owner]
        with self.db.read() as q:
            rows = q.all(sql + " GROUP BY owner, type, status", args)
        return [(str(o), str(t), str(s), int(n)) for o, t, s, n in rows]

    def embeddings(self, owner: str, ids: Sequence[str]) -> dict[str, Vector]:
        # Straight from the rows: current (another process may have re-embedded one), inactive
        # ones and this transaction's included.
        d = self.db.dialect
        out: dict[str, Vector] = {}
        with self.db.read() as q:
            for cond, args in d.in_lists("id", list(dict.fromkeys(ids))):
                for mid, vec in q.all(
                    f"SELECT id, embedding FROM memories WHERE {d.owner_filter} = ? AND {cond}",
                    [owner, *args],
                    binary=True,
                ):
                    out[mid] = d.vec_out(vec)
        return out

    def pinned_sql(
        self,
        owner: str,
        agent: str | None,
        types: Collection[MemoryType],
        limit: int,
        sort: PinnedSort,
        project: str | None = None,
    ) -> tuple[str, list[Any]]:
        """The statement of :meth:`pinned` (rows of :data:`MEMORY_COLUMNS`): for each type, its
        first ``limit`` rows in the order asked (one walk of the ``memories_pinned_*`` index,
        migration 0007 / PostgreSQL 0005), then the first ``limit`` of those. One statement
        over every type with ``type IN (...)`` walked every active memory of the owner (the
        planner cannot keep an index's order across the values of an ``IN``): 245 ms a turn at
        93,641 memories sorted by importance."""
        order = (
            "importance DESC, created_at DESC"
            if PinnedSort(sort) is PinnedSort.IMPORTANCE
            else "created_at DESC"
        )
        # distinct type values: a list bounded by the enum's size, whatever the caller passed
        wanted = list(dict.fromkeys(MemoryType(t).value for t in types)) or [""]
        where, scope_args = scope_sql(owner, agent, project)
        k = max(0, int(limit))
        arms = [
            f"SELECT * FROM (SELECT {MEMORY_COLUMNS} FROM memories WHERE {where} "
            f"AND status = 'active' AND type = ? ORDER BY {order} LIMIT ?) AS t{i}"
            for i in range(len(wanted))
        ]
        args = [a for value in wanted for a in (*scope_args, value, k)]
        return f"{' UNION ALL '.join(arms)} ORDER BY {order} LIMIT ?", [*args, k]

    def session_ids(self, q: Q, owner: str, session: str, since: datetime | None) -> set[str]:
        """Ids of ``owner``'s active memories learned in ``session`` (after ``since``)."""
        sql = "SELECT id FROM memories WHERE owner = ? AND session = ? AND status = 'active'"
        args: list[Any] = [owner, session]
        if since is not None:
            sql += " AND created_at > ?"
            args.append(self.db.dialect.time_in(since))
        return {r[0] for r in q.all(sql, args)}

    def session_memory_ids(self, owner: str, session: str, since: datetime | None) -> set[str]:
        with self.db.read() as q:
            return self.session_ids(q, owner, session, since)

    @staticmethod
    def since_reset_sql(owner: str, session: str) -> tuple[str, list[Any]]:
        """Ids (one a row) of ``owner``'s active memories learned in ``session`` since the
        session's last reset, the reset time read in SQL (one statement, batchable)."""
        return (
            "SELECT id FROM memories WHERE owner = ? AND session = ? AND status = 'active' "
            "AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.owner = ? AND s.session = ? "
            "AND s.last_reset_at >= memories.created_at)",
            [owner, session, owner, session],
        )

    # ------------------------------------------------------------------ writes
    def insert(self, memory: NewMemory, embedding: Vector) -> Memory:
        d = self.db.dialect
        with self.db.write() as q:
            self.db.lock_owner(q, memory.owner)
            now = d.time_in(memory.created_at)
            row = q.all(
                "INSERT INTO memories (id, owner, agent, session, source, type, content, "
                "content_hash, importance, status, created_at, updated_at, metadata, embedding, "
                f"project, {d.seq_column}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, "
                f"?, ?, {self.db.seq_sql}) RETURNING {MEMORY_COLUMNS}",
                (
                    memory.id,
                    memory.owner,
                    memory.agent,
                    memory.session,
                    memory.source,
                    memory.type.value,
                    memory.content,
                    memory.content_hash,
                    memory.importance,
                    now,
                    now,
                    dumps(memory.metadata),
                    d.vec_in(embedding),
                    memory.project,
                    *self.db.seq_args(),
                ),
            )[0]
            self.vectors.written(memory.owner, int(row[0]), memory.agent, embedding)
            return self.rows.memory(row)

    def replace_content(self, /, owner: str, *change: Any, **named: Any) -> Memory:
        """``change``: the contract's arguments after the owner, as the record
        :class:`ContentChange`."""
        memory_id, content, content_hash, embedding, reason = ContentChange(*change, **named)
        d = self.db.dialect
        with self.db.write() as q:
            self.db.lock_owner(q, owner)
            num, old = self.require(q, owner, memory_id)
            self.add_history(q, old, ChangeReason(reason))
            row = q.all(
                "UPDATE memories SET content = ?, content_hash = ?, embedding = ?, updated_at = ?, "
                f"{d.seq_column} = {self.db.seq_sql} WHERE num = ? RETURNING {MEMORY_COLUMNS}",
                (
                    content,
                    content_hash,
                    d.vec_in(embedding),
                    d.time_in(utcnow()),
                    *self.db.seq_args(),
                    num,
                ),
            )[0]
            self.vectors.written(old.owner, num, old.agent, embedding)
            return self.rows.memory(row)

    def confirm(self, /, owner: str, *seen: Any, **named: Any) -> Memory:
        """``seen``: the contract's arguments after the owner, as the record
        :class:`Confirmation`."""
        memory_id, provenance, importance = Confirmation(*seen, **named)
        d = self.db.dialect
        with self.db.write() as q:
            self.db.lock_owner(q, owner)
            num, old = self.require(q, owner, memory_id)
            metadata = merge_metadata(old.metadata, provenance)
            row = q.all(
                "UPDATE memories SET confirmations = confirmations + 1, metadata = ?, "
                f"updated_at = ?, importance = {d.greatest}(importance, coalesce(?, 0)) "
                f"WHERE num = ? RETURNING {MEMORY_COLUMNS}",
                (dumps(metadata), d.time_in(utcnow()), importance, num),
            )[0]
            return self.rows.memory(row)

    def move_to_project(self, owner: str, agent: str, new_agent: str | None, project: str) -> int:
        d = self.db.dialect
        with self.db.write() as q:
            self.db.lock_owner(q, owner)
            nums = q.all(
                "SELECT num FROM memories WHERE owner = ? AND agent = ? AND project IS NULL",
                (owner, agent),
            )
            for (num,) in nums:  # a change number each: the search caches read the row again
                q.run(
                    f"UPDATE memories SET agent = ?, project = ?, {d.seq_column} = "
                    f"{self.db.seq_sql} WHERE num = ?",
                    (new_agent, project, *self.db.seq_args(), num),
                )
        return len(nums)

    def set_status(self, owner: str, memory_id: str, status: Status) -> Memory:
        with self.db.write() as q:
            self.db.lock_owner(q, owner)
            num, _ = self.require(q, owner, memory_id)
            return self.set_status_row(q, num, status)
