"""Mapping between ``memories`` rows and :class:`~memlane.types.Memory` values (every backend:
the same columns, read through the dialect)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memlane import types
from memlane.store.sql.dialect import Dialect

__all__ = ["DEDUP_LOG_COLUMNS", "LINK_COLUMNS", "MEMORY_COLUMNS", "Rows"]

#: Columns of a full memory row, in the order :meth:`Rows.memory` reads them (``num`` first).
MEMORY_COLUMNS = (
    "num, id, owner, agent, session, source, type, content, content_hash, importance, status, "
    "created_at, updated_at, last_accessed_at, access_count, confirmations, metadata, valid_to, "
    "project"
)
#: Columns of a ``dedup_log`` row, in the order :func:`dedup_entry_of` reads them (the same
#: table on every backend).
DEDUP_LOG_COLUMNS = (
    "id, owner, new_text, existing_id, existing_text, similarity, decision, reasoning, "
    "review_status, created_at"
)


def dedup_entry_of(row: Sequence[Any], created_at: datetime) -> types.DedupLogEntry:
    """The entry of a row of :data:`DEDUP_LOG_COLUMNS`; ``created_at``: ``row[9]`` as an aware
    UTC datetime (each backend stores it its own way)."""
    return types.DedupLogEntry(
        id=int(row[0]),
        owner=row[1],
        new_text=row[2],
        existing_id=row[3],
        existing_text=row[4],
        similarity=row[5],
        decision=types.Decision(row[6]),
        reasoning=row[7],
        review_status=types.ReviewStatus(row[8]),
        created_at=created_at,
    )


#: Columns of an association (prefix ``a.``), in the order :meth:`Rows.link` reads them.
LINK_COLUMNS = "a.source_id, a.target_id, a.relation, a.weight, a.created_at"
#: Columns of a history row, in the order :meth:`Rows.version` reads them.
VERSION_COLUMNS = "memory_id, version, content, content_hash, reason, replaced_at"


#: Enum members by stored value: a dict lookup, not the enum's call (~1.5 us each, twice a row).
_TYPES = {t.value: t for t in types.MemoryType}
_STATUSES = {s.value: s for s in types.Status}


class Rows:
    """Rows to values through one dialect (times and JSON are stored each backend's way)."""

    __slots__ = ("d",)

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect

    def memory(self, row: Sequence[Any]) -> types.Memory:
        """The memory of a row of :data:`MEMORY_COLUMNS` (``row[0]``, the row number, is not
        in it). Raises ``ValueError`` for an unknown type or status."""
        d = self.d
        time_out = d.time_out
        kind, status = _TYPES.get(row[6]), _STATUSES.get(row[10])
        if kind is None or status is None:  # the enums raise the ValueError naming the value
            kind, status = types.MemoryType(row[6]), types.Status(row[10])
        return types.Memory(
            id=row[1],
            owner=row[2],
            agent=row[3],
            session=row[4],
            source=row[5],
            type=kind,
            content=row[7],
            content_hash=row[8],
            importance=float(row[9]),
            status=status,
            created_at=time_out(row[11]),  # type: ignore[arg-type]
            updated_at=time_out(row[12]),  # type: ignore[arg-type]
            last_accessed_at=time_out(row[13]),
            access_count=int(row[14]),
            confirmations=int(row[15]),
            metadata=dict(d.json_out(row[16]) or {}),
            valid_to=time_out(row[17]),
            project=row[18],
        )

    def entry(self, row: Sequence[Any]) -> types.DedupLogEntry:
        """The dedup-log entry of a row of :data:`DEDUP_LOG_COLUMNS`."""
        return dedup_entry_of(row, self.d.time_out(row[9]))  # type: ignore[arg-type]

    def link(self, row: Sequence[Any]) -> types.Association:
        """The association of a row of :data:`LINK_COLUMNS`."""
        return types.Association(
            source_id=row[0],
            target_id=row[1],
            relation=types.Relation(row[2]),
            weight=float(row[3]),
            created_at=self.d.time_out(row[4]),  # type: ignore[arg-type]
        )

    def version(self, row: Sequence[Any]) -> types.MemoryVersion:
        """The history version of a row of :data:`VERSION_COLUMNS`."""
        return types.MemoryVersion(
            memory_id=row[0],
            version=int(row[1]),
            content=row[2],
            content_hash=row[3],
            reason=types.ChangeReason(row[4]),
            replaced_at=self.d.time_out(row[5]),  # type: ignore[arg-type]
        )
