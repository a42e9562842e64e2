"""Restoring an exported memory as it was (``memlane import`` of ``memlane export``'s file,
memlane.transfer): same id, status, timestamps, counters and history."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memlane._ids import to_iso
from memlane.store.base import NewMemory, Vector
from memlane.types import Memory, MemoryVersion, Status


class RestoreMixin:
    if TYPE_CHECKING:
        _conn: sqlite3.Connection
        _lock: threading.RLock

        def _require_tx(self) -> None: ...

        def insert(self, memory: NewMemory, embedding: Vector) -> Memory: ...

        def set_status(self, owner: str, memory_id: str, status: Status) -> Memory: ...

    def restore(self, memory: Memory, history: Sequence[MemoryVersion], embedding: Vector) -> None:
        """Insert ``memory`` exactly as given (id, status, timestamps, counters) with its
        ``history``. Inside a transaction. Raises :class:`StoreError` for an id already stored."""
        with self._lock:
            self._require_tx()
            self.insert(new_of(memory), embedding)
            if memory.status is not Status.ACTIVE:
                self.set_status(memory.owner, memory.id, memory.status)
            self._conn.execute(
                "UPDATE memories SET updated_at = ?, last_accessed_at = ?, access_count = ?, "
                "confirmations = ?, valid_to = ? WHERE id = ?",
                (
                    to_iso(memory.updated_at),
                    None if memory.last_accessed_at is None else to_iso(memory.last_accessed_at),
                    memory.access_count,
                    memory.confirmations,
                    None if memory.valid_to is None else to_iso(memory.valid_to),
                    memory.id,
                ),
            )
            self._conn.executemany(
                "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, "
                "replaced_at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        memory.id,
                        v.version,
                        v.content,
                        v.content_hash,
                        v.reason.value,
                        to_iso(v.replaced_at),
                    )
                    for v in history
                ],
            )


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
    )
