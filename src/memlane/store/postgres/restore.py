"""Restoring an exported memory as it was on PostgreSQL (see :mod:`memlane.store.sqlite.restore`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlane.store.base import NewMemory, Vector
from memlane.store.sqlite.restore import new_of
from memlane.types import Memory, MemoryVersion, Status

if TYPE_CHECKING:
    import psycopg


class RestoreMixin:
    if TYPE_CHECKING:

        def _require_tx(self) -> psycopg.Connection[Any]: ...

        def insert(self, memory: NewMemory, embedding: Vector) -> Memory: ...

        def set_status(self, owner: str, memory_id: str, status: Status) -> Memory: ...

    def restore(self, memory: Memory, history: Sequence[MemoryVersion], embedding: Vector) -> None:
        """Insert ``memory`` exactly as given (id, status, timestamps, counters) with its
        ``history``. Inside a transaction. Raises :class:`StoreError` for an id already stored."""
        conn = self._require_tx()
        self.insert(new_of(memory), embedding)
        if memory.status is not Status.ACTIVE:
            self.set_status(memory.owner, memory.id, memory.status)
        conn.execute(
            "UPDATE memories SET updated_at = %s, last_accessed_at = %s, access_count = %s, "
            "confirmations = %s, valid_to = %s WHERE id = %s",
            (
                memory.updated_at,
                memory.last_accessed_at,
                memory.access_count,
                memory.confirmations,
                memory.valid_to,
                memory.id,
            ),
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, "
                "replaced_at) VALUES (%s, %s, %s, %s, %s, %s)",
                [
                    (memory.id, v.version, v.content, v.content_hash, v.reason.value, v.replaced_at)
                    for v in history
                ],
            )
