"""Associations and the dedup log of the SQLite store: a mixin of
:class:`~memlane.store.sqlite.store.SQLiteStore`, which supplies the connection, the lock and the
row lookups. Contracts: :class:`~memlane.store.base.MemoryStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlane._ids import from_iso, to_iso, utcnow
from memlane.store.base import DEDUP_LOG_COLUMNS, NewDedupLog, dedup_entry_of, iter_chunks
from memlane.types import Association, Decision, DedupLogEntry, Memory, Relation, ReviewStatus

if TYPE_CHECKING:
    import sqlite3
    import threading


class LinksMixin:
    """Associations between memories and the dedup log, over SQLite."""

    if TYPE_CHECKING:
        _conn: sqlite3.Connection
        _lock: threading.RLock

        def _require_tx(self) -> None: ...

        def _require(self, owner: str, memory_id: str) -> tuple[int, Memory]: ...

    def add_association(
        self, owner: str, source_id: str, target_id: str, relation: Relation, weight: float
    ) -> None:
        with self._lock:
            self._require_tx()
            self._require(owner, source_id)
            self._require(owner, target_id)
            self._conn.execute(
                "INSERT INTO associations (source_id, target_id, relation, weight, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (source_id, target_id, relation) "
                "DO UPDATE SET weight = max(weight, excluded.weight)",
                (source_id, target_id, Relation(relation).value, float(weight), to_iso(utcnow())),
            )

    def _associations(self, owner: str, where: str, args: Sequence[Any]) -> list[Association]:
        """Links matching ``where`` whose both ends are ``owner``'s memories."""
        return [
            Association(
                source_id=r[0],
                target_id=r[1],
                relation=Relation(r[2]),
                weight=float(r[3]),
                created_at=from_iso(r[4]),  # type: ignore[arg-type]
            )
            for r in self._conn.execute(
                "SELECT a.source_id, a.target_id, a.relation, a.weight, a.created_at "
                "FROM associations a JOIN memories s ON s.id = a.source_id "
                "JOIN memories t ON t.id = a.target_id "
                f"WHERE s.owner = ? AND t.owner = ? AND ({where})",
                [owner, owner, *args],
            )
        ]

    def associations(self, owner: str, memory_id: str) -> list[Association]:
        with self._lock:
            self._require(owner, memory_id)
            return self._associations(
                owner, "a.source_id = ? OR a.target_id = ?", (memory_id, memory_id)
            )

    def neighbours(self, owner: str, ids: Sequence[str]) -> list[Association]:
        out: list[Association] = []
        with self._lock:
            for chunk in iter_chunks(list(dict.fromkeys(ids))):
                marks = ",".join("?" * len(chunk))
                out.extend(
                    self._associations(
                        owner,
                        f"a.source_id IN ({marks}) OR a.target_id IN ({marks})",
                        [*chunk, *chunk],
                    )
                )
        return list(dict.fromkeys(out))  # a link between two chunks is found twice

    def log_dedup(self, entry: NewDedupLog) -> None:
        with self._lock:
            self._require_tx()
            self._conn.execute(
                "INSERT INTO dedup_log (owner, new_text, existing_id, existing_text, similarity, "
                "decision, reasoning, review_status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.owner,
                    entry.new_text,
                    entry.existing_id,
                    entry.existing_text,
                    entry.similarity,
                    Decision(entry.decision).value,
                    entry.reasoning,
                    ReviewStatus(entry.review_status).value,
                    to_iso(utcnow()),
                ),
            )

    def dedup_log(
        self, owner: str, *, decision: Decision | None = None, limit: int = 100
    ) -> list[DedupLogEntry]:
        where, args = ["owner = ?"], [owner]
        if decision is not None:
            where.append("decision = ?")
            args.append(Decision(decision).value)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE {' AND '.join(where)} "
                "ORDER BY id DESC LIMIT ?",
                [*args, int(limit)],
            ).fetchall()
        return [
            dedup_entry_of(r, from_iso(r[9]))  # type: ignore[arg-type]
            for r in rows
        ]
