"""Real deletion and restoring an export, written once for every backend (issue #24,
docs/security.md). :func:`purge` deletes memories with every row that holds their text: the
memory, its history, the dedup log rows that quote it, its associations, the session records
that name it; for a whole owner, every row of the owner. What the backend's files keep besides
is its own step (:meth:`~memlane.store.sql.database.Database.purge_statements` in the
transaction, :meth:`~memlane.store.sql.database.Database.after_purge` after it: SQLite zeroes the
freed pages, rebuilds the FTS5 index and truncates the WAL; PostgreSQL leaves old row versions
to ``VACUUM``, as ``memlane purge`` says). Other processes' search caches: the purge leaves the
owner's purge mark in the change feed (:mod:`.feed`), so each drops and rebuilds its indexes and
none saves the purged rows back (issue #33). :func:`restore` inserts an exported memory as it
was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlane.store.base import NewMemory, Vector
from memlane.store.index_cache import IndexCache
from memlane.store.sql.database import Database
from memlane.store.sql.dialect import Q
from memlane.store.sql.feed import mark_purge_sql
from memlane.store.sql.memories import Memories
from memlane.types import Memory, MemoryVersion, Status

#: Tables holding rows of an owner with an ``owner`` column, emptied by a whole-owner purge
#: (``memories`` last).
_OWNER_TABLES = (
    "dedup_log",
    "sessions",
    "session_injections",
    "session_turns",
    "injection_events",
    "learn_cursors",
)


def _either(q: Q, sql: str, column_a: str, column_b: str, keys: Sequence[Any], *head: Any) -> None:
    """Run ``sql`` (ending in ``{cond}``) for each chunk of ``keys``: rows whose ``column_a``
    or ``column_b`` is among them."""
    d = q.dialect
    for chunk in d.chunks(list(keys)):
        (a, args), (b, _) = d.in_list(column_a, chunk), d.in_list(column_b, chunk)
        q.run(sql.format(cond=f"({a} OR {b})"), [*head, *args, *args])


def purge(db: Database, cache: IndexCache, owner: str, memory_ids: Sequence[str] | None) -> int:
    """Delete ``memory_ids`` of ``owner`` (``None``: everything of ``owner``) and every row that
    holds their text; returns the memories deleted (ids of other owners count 0). Its own write
    transaction."""
    d = db.dialect
    db.prepare_purge()
    with db.transaction(), db.write() as q:
        db.lock_owner(q, owner)
        # numbered before the rows go (SQLite numbers on from the highest row: the mark must
        # come after the purged rows' own numbers, which other caches may have read)
        mark = mark_purge_sql(db, owner)
        if memory_ids is None:
            ids = [str(r[0]) for r in q.all("SELECT id FROM memories WHERE owner = ?", (owner,))]
        else:
            ids = []
            for cond, args in d.in_lists("id", list(dict.fromkeys(memory_ids))):
                ids += [
                    str(r[0])
                    for r in q.all(
                        f"SELECT id FROM memories WHERE owner = ? AND {cond}", [owner, *args]
                    )
                ]
        texts: list[str] = []
        for cond, args in d.in_lists("id", ids):
            texts += [str(r[0]) for r in q.all(f"SELECT content FROM memories WHERE {cond}", args)]
        for cond, args in d.in_lists("memory_id", ids):
            texts += [
                str(r[0]) for r in q.all(f"SELECT content FROM memory_history WHERE {cond}", args)
            ]
        if memory_ids is None:
            for table in _OWNER_TABLES:
                q.run(f"DELETE FROM {table} WHERE owner = ?", (owner,))
        else:
            for column in ("existing_id", "new_text", "existing_text"):
                for cond, args in d.in_lists(column, ids if column == "existing_id" else texts):
                    q.run(f"DELETE FROM dedup_log WHERE owner = ? AND {cond}", [owner, *args])
            for cond, args in d.in_lists("memory_id", ids):
                q.run(f"DELETE FROM session_injections WHERE owner = ? AND {cond}", [owner, *args])
            gone = set(ids)
            events = q.all("SELECT id, memory_ids FROM injection_events WHERE owner = ?", (owner,))
            stale = [int(n) for n, shown in events if gone & set(d.json_out(shown))]
            for cond, args in d.in_lists("id", stale, "bigint"):
                q.run(f"DELETE FROM injection_events WHERE {cond}", args)
        for cond, args in d.in_lists("memory_id", ids):
            q.run(f"DELETE FROM memory_history WHERE {cond}", args)
        _either(q, "DELETE FROM associations WHERE {cond}", "source_id", "target_id", ids)
        for cond, args in d.in_lists("id", ids):
            q.run(f"DELETE FROM memories WHERE {cond}", args)
        if ids:  # every process's search caches see it in the feed (store/index_cache.py)
            q.run(*mark)
        for statement in db.purge_statements():
            q.run(statement)
    with db.cache_lock():
        cache.drop(owner)
    db.after_purge()
    return len(ids)


def new_of(memory: Memory) -> NewMemory:
    """The insertable part of ``memory``."""
    return NewMemory(
        id=memory.id,
        content=memory.content,
        content_hash=memory.content_hash,
        type=memory.type,
        importance=memory.importance,
        owner=memory.owner,
        agent=memory.agent,
        session=memory.session,
        source=memory.source,
        created_at=memory.created_at,
        metadata=memory.metadata,
        project=memory.project,
    )


def restore(
    db: Database,
    memories: Memories,
    memory: Memory,
    history: Sequence[MemoryVersion],
    embedding: Vector,
) -> None:
    """Insert ``memory`` exactly as given (id, status, timestamps, counters) with its
    ``history``, in the open transaction. Raises :class:`~memlane.errors.StoreError` for an id
    already stored."""
    d = db.dialect
    with db.write() as q:
        memories.insert(new_of(memory), embedding)
        if memory.status is not Status.ACTIVE:
            memories.set_status(memory.owner, memory.id, memory.status)
        q.run(
            "UPDATE memories SET updated_at = ?, last_accessed_at = ?, access_count = ?, "
            "confirmations = ?, valid_to = ? WHERE id = ?",
            (
                d.time_in(memory.updated_at),
                d.time_in(memory.last_accessed_at),
                memory.access_count,
                memory.confirmations,
                d.time_in(memory.valid_to),
                memory.id,
            ),
        )
        q.many(
            "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, "
            "replaced_at) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    memory.id,
                    v.version,
                    v.content,
                    v.content_hash,
                    v.reason.value,
                    d.time_in(v.replaced_at),
                )
                for v in history
            ],
        )
