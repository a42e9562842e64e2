"""Associations and the dedup log of the PostgreSQL store: a mixin of
:class:`~memlane.store.postgres.store.PostgresStore`. Contracts:
:class:`~memlane.store.base.MemoryStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memlane._ids import utcnow
from memlane.store.base import DEDUP_LOG_COLUMNS, NewDedupLog, dedup_entry_of
from memlane.store.postgres.rows import utc
from memlane.types import Association, Decision, DedupLogEntry, Memory, Relation, ReviewStatus

if TYPE_CHECKING:
    import psycopg

_LINKS = (
    "SELECT a.source_id, a.target_id, a.relation, a.weight, a.created_at "
    "FROM associations a JOIN memories s ON s.id = a.source_id "
    "JOIN memories t ON t.id = a.target_id WHERE s.owner = %(o)s AND t.owner = %(o)s AND "
)


class LinksMixin:
    """Associations between memories and the dedup log, over PostgreSQL."""

    if TYPE_CHECKING:

        def _use(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

        def _require_tx(self) -> psycopg.Connection[Any]: ...

        def _require(
            self, conn: psycopg.Connection[Any], owner: str, memory_id: str
        ) -> tuple[int, Memory]: ...

    def add_association(
        self, owner: str, source_id: str, target_id: str, relation: Relation, weight: float
    ) -> None:
        conn = self._require_tx()
        self._require(conn, owner, source_id)
        self._require(conn, owner, target_id)
        conn.execute(
            "INSERT INTO associations (source_id, target_id, relation, weight, created_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (source_id, target_id, relation) "
            "DO UPDATE SET weight = GREATEST(associations.weight, excluded.weight)",
            (source_id, target_id, Relation(relation).value, float(weight), utcnow()),
        )

    @staticmethod
    def _to_links(rows: Sequence[Sequence[Any]]) -> list[Association]:
        return [
            Association(
                source_id=r[0],
                target_id=r[1],
                relation=Relation(r[2]),
                weight=float(r[3]),
                created_at=utc(r[4]),  # type: ignore[arg-type]
            )
            for r in rows
        ]

    def associations(self, owner: str, memory_id: str) -> list[Association]:
        with self._use() as conn:
            self._require(conn, owner, memory_id)
            rows = conn.execute(
                _LINKS + "(a.source_id = %(m)s OR a.target_id = %(m)s)",
                {"o": owner, "m": memory_id},
            ).fetchall()
        return self._to_links(rows)

    def neighbours(self, owner: str, ids: Sequence[str]) -> list[Association]:
        if not ids:
            return []
        with self._use() as conn:
            rows = conn.execute(
                _LINKS + "(a.source_id = ANY(%(m)s::text[]) OR a.target_id = ANY(%(m)s::text[]))",
                {"o": owner, "m": list(dict.fromkeys(ids))},
            ).fetchall()
        return self._to_links(rows)

    def log_dedup(self, entry: NewDedupLog) -> None:
        conn = self._require_tx()
        conn.execute(
            "INSERT INTO dedup_log (owner, new_text, existing_id, existing_text, similarity, "
            "decision, reasoning, review_status, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                entry.owner,
                entry.new_text,
                entry.existing_id,
                entry.existing_text,
                entry.similarity,
                Decision(entry.decision).value,
                entry.reasoning,
                ReviewStatus(entry.review_status).value,
                utcnow(),
            ),
        )

    def dedup_log(
        self, owner: str, *, decision: Decision | None = None, limit: int = 100
    ) -> list[DedupLogEntry]:
        where, args = ["owner = %s"], [owner]
        if decision is not None:
            where.append("decision = %s")
            args.append(Decision(decision).value)
        with self._use() as conn:
            rows = conn.execute(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE {' AND '.join(where)} "
                "ORDER BY id DESC LIMIT %s",
                [*args, int(limit)],
            ).fetchall()
        return [
            dedup_entry_of(r, utc(r[9]))  # type: ignore[arg-type]
            for r in rows
        ]
