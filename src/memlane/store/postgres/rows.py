"""Mapping between PostgreSQL ``memories`` rows and :class:`~memlane.types.Memory` values."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memlane.types import Memory, MemoryType, Status

#: Columns of a full memory row, in the order :func:`row_to_memory` reads them (``num`` first).
MEMORY_COLUMNS = (
    "num, id, owner, agent, session, source, type, content, content_hash, importance, status, "
    "created_at, updated_at, last_accessed_at, access_count, confirmations, metadata, valid_to"
)


def utc(value: datetime | None) -> datetime | None:
    """``value`` in UTC (psycopg returns the session time zone's tzinfo)."""
    return None if value is None else value.astimezone(UTC)


def row_to_memory(row: Sequence[Any]) -> Memory:
    """The memory of a row of :data:`MEMORY_COLUMNS` (``row[0]``, the row number, is not in
    it). Raises ``ValueError`` for an unknown type or status."""
    return Memory(
        id=row[1],
        owner=row[2],
        agent=row[3],
        session=row[4],
        source=row[5],
        type=MemoryType(row[6]),
        content=row[7],
        content_hash=row[8],
        importance=float(row[9]),
        status=Status(row[10]),
        created_at=utc(row[11]),  # type: ignore[arg-type]
        updated_at=utc(row[12]),  # type: ignore[arg-type]
        last_accessed_at=utc(row[13]),
        access_count=int(row[14]),
        confirmations=int(row[15]),
        metadata=dict(row[16] or {}),
        valid_to=utc(row[17]),
    )
