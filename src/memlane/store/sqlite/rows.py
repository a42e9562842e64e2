"""Mapping between ``memories`` rows and :class:`~memlane.types.Memory` values."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memlane._ids import from_iso
from memlane.types import Memory, MemoryType, Status

#: Columns of a full memory row, in the order :func:`row_to_memory` reads them (``num`` first).
MEMORY_COLUMNS = (
    "num, id, owner, agent, session, source, type, content, content_hash, importance, status, "
    "created_at, updated_at, last_accessed_at, access_count, confirmations, metadata, valid_to"
)
#: A status change; a memory superseded gets its ``valid_to`` time (params: status, now, seq, num).
SET_STATUS_SQL = (
    "UPDATE memories SET status = ?1, updated_at = ?2, vec_seq = ?3, "
    "valid_to = CASE WHEN ?1 = 'superseded' THEN ?2 ELSE valid_to END WHERE num = ?4"
)


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
        created_at=from_iso(row[11]),  # type: ignore[arg-type]
        updated_at=from_iso(row[12]),  # type: ignore[arg-type]
        last_accessed_at=from_iso(row[13]),
        access_count=int(row[14]),
        confirmations=int(row[15]),
        metadata=json.loads(row[16]),
        valid_to=from_iso(row[17]),
    )


def merge_metadata(existing: Mapping[str, Any], offered: Mapping[str, Any]) -> dict[str, Any]:
    """Merge offered metadata into existing: new keys added; lists unioned (order kept);
    differing scalars become the list of both — nothing the caller offered is dropped."""
    out = dict(existing)
    for key, value in offered.items():
        if value is None:
            continue
        if key not in out or out[key] is None:
            out[key] = value
            continue
        old = out[key]
        if old == value:
            continue
        if isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge_metadata(old, value)
            continue
        merged = list(old) if isinstance(old, list) else [old]
        for item in value if isinstance(value, list) else [value]:
            if item not in merged:
                merged.append(item)
        out[key] = merged
    return out
