"""The store's upkeep, written once for every backend: the janitor's merge of a cluster
(:meth:`~memlane.store.base.MemoryStore.merge_memories`; what changes:
:class:`~memlane.store.base.ClusterMerge`), and purge and restore (:mod:`.purge`) as the part
:class:`Maintenance` the store forwards them to."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memlane._ids import utcnow
from memlane.store.base import ClusterMerge, Vector
from memlane.store.index_cache import IndexCache
from memlane.store.metadata import merge_metadata
from memlane.store.sql.database import Database
from memlane.store.sql.links import Links
from memlane.store.sql.memories import Memories, dumps
from memlane.store.sql.purge import purge, restore
from memlane.store.sql.rows import MEMORY_COLUMNS
from memlane.types import ChangeReason, Memory, MemoryVersion, Status


def merge_memories(
    db: Database, memories: Memories, links: Links, owner: str, merge: ClusterMerge
) -> Memory:
    """Apply one janitor merge in the open transaction: the survivor's old text (when it changes)
    and every absorbed member's text go to the survivor's history; the survivor takes the merged
    fields; each member is superseded with ``merged_into`` in its metadata; their links move to
    the survivor. Raises :class:`~memlane.errors.NotFound` when a member is not ``owner``'s."""
    d = db.dialect
    with db.write() as q:
        db.lock_owner(q, owner)
        num, survivor = memories.require(q, owner, merge.survivor)
        absorbed = [memories.require(q, owner, mid) for mid in merge.absorbed]
        reason = ChangeReason(merge.reason)
        if merge.content != survivor.content:
            memories.add_history(q, survivor, reason)
        for _, member in absorbed:
            # the member's text in the survivor's history: reachable from the one that lives on
            memories.add_history(q, dataclasses.replace(member, id=survivor.id), reason)
        q.run(
            "UPDATE memories SET content = ?, content_hash = ?, embedding = ?, importance = ?, "
            "created_at = ?, confirmations = ?, metadata = ?, updated_at = ?, "
            f"{d.seq_column} = {db.seq_sql} WHERE num = ?",
            (
                merge.content,
                merge.content_hash,
                d.vec_in(merge.embedding),
                float(merge.importance),
                d.time_in(merge.created_at),
                int(merge.confirmations),
                dumps(merge.metadata),
                d.time_in(utcnow()),
                *db.seq_args(),
                num,
            ),
        )
        memories.vectors.written(owner, num, survivor.agent, merge.embedding)
        for member_num, member in absorbed:
            meta = merge_metadata(member.metadata, {"merged_into": survivor.id})
            q.run("UPDATE memories SET metadata = ? WHERE num = ?", (dumps(meta), member_num))
            memories.set_status_row(q, member_num, Status.SUPERSEDED)
        links.repoint(q, survivor.id, [m.id for _, m in absorbed])
        row = q.one(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE num = ?", (num,))
        assert row is not None
        return memories.rows.memory(row)


class Maintenance:
    """Merge, purge and restore over one :class:`Database` (the contract's upkeep methods)."""

    def __init__(self, db: Database, memories: Memories, links: Links, cache: IndexCache) -> None:
        self.db = db
        self.memories = memories
        self.links = links
        self.cache = cache

    def merge_memories(self, owner: str, merge: ClusterMerge) -> Memory:
        return merge_memories(self.db, self.memories, self.links, owner, merge)

    def purge(self, owner: str, memory_ids: Sequence[str] | None = None) -> int:
        return purge(self.db, self.cache, owner, memory_ids)

    def restore(self, memory: Memory, history: Sequence[MemoryVersion], embedding: Vector) -> None:
        restore(self.db, self.memories, memory, history, embedding)
