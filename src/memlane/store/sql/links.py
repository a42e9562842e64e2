"""Associations between memories and the dedup log, written once for every backend. Contracts:
:class:`~memlane.store.base.MemoryStore`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlane._ids import utcnow
from memlane.errors import NotFound
from memlane.privacy import for_llm
from memlane.store.base import NewDedupLog
from memlane.store.sql.database import Database
from memlane.store.sql.dialect import Q
from memlane.store.sql.memories import Memories
from memlane.store.sql.rows import DEDUP_LOG_COLUMNS, LINK_COLUMNS, Rows
from memlane.types import Association, Decision, DedupLogEntry, Relation, ReviewStatus

#: Links whose both ends are the owner's (params: owner, owner, then the condition's).
_LINKS = (
    f"SELECT {LINK_COLUMNS} FROM associations a JOIN memories s ON s.id = a.source_id "
    "JOIN memories t ON t.id = a.target_id WHERE s.owner = ? AND t.owner = ? AND "
)


class Links:
    """Associations and the dedup log over one :class:`Database`; ``memories`` checks that
    both ends of a new link are the owner's."""

    def __init__(self, db: Database, memories: Memories) -> None:
        self.db = db
        self.memories = memories
        self.rows = Rows(db.dialect)
        self._upsert = (
            "INSERT INTO associations (source_id, target_id, relation, weight, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (source_id, target_id, relation) DO UPDATE SET "
            f"weight = {db.dialect.greatest}(associations.weight, excluded.weight)"
        )

    # ------------------------------------------------------------------ associations
    def link(
        self, q: Q, source_id: str, target_id: str, relation: str, weight: float, created: Any
    ) -> None:
        """Insert a link on ``q`` (an existing one keeps the larger weight)."""
        q.run(self._upsert, (source_id, target_id, relation, float(weight), created))

    def add_association(
        self, owner: str, source_id: str, target_id: str, relation: Relation, weight: float
    ) -> None:
        with self.db.write() as q:
            self.memories.require(q, owner, source_id)
            self.memories.require(q, owner, target_id)
            self.link(
                q,
                source_id,
                target_id,
                Relation(relation).value,
                weight,
                self.db.dialect.time_in(utcnow()),
            )

    def associations(self, owner: str, memory_id: str) -> list[Association]:
        with self.db.read() as q:
            self.memories.require(q, owner, memory_id)
            rows = q.all(
                _LINKS + "(a.source_id = ? OR a.target_id = ?)",
                (owner, owner, memory_id, memory_id),
            )
        return [self.rows.link(r) for r in rows]

    def neighbours(self, owner: str, ids: Sequence[str]) -> list[Association]:
        with self.db.read() as q:
            return self.neighbours_on(q, owner, ids)

    def neighbours_on(self, q: Q, owner: str, ids: Sequence[str]) -> list[Association]:
        """:meth:`neighbours` on the handle ``q``."""
        out: list[Association] = []
        d = self.db.dialect
        for chunk in d.chunks(list(dict.fromkeys(ids))):
            (src, args), (tgt, _) = d.in_list("a.source_id", chunk), d.in_list("a.target_id", chunk)
            rows = q.all(_LINKS + f"({src} OR {tgt})", [owner, owner, *args, *args])
            out.extend(self.rows.link(r) for r in rows)
        return list(dict.fromkeys(out))  # a link between two chunks is found twice

    def repoint(self, q: Q, survivor: str, absorbed: Sequence[str]) -> None:
        """Move every link touching an absorbed member to the survivor (an existing link keeps
        the larger weight; links inside the cluster, now loops, are dropped)."""
        gone = set(absorbed)
        d = self.db.dialect
        for chunk in d.chunks(list(absorbed)):
            (src, args), (tgt, _) = d.in_list("source_id", chunk), d.in_list("target_id", chunk)
            rows = q.all(
                f"DELETE FROM associations WHERE {src} OR {tgt} "
                "RETURNING source_id, target_id, relation, weight, created_at",
                [*args, *args],
            )
            for src, tgt, relation, weight, created in rows:
                new_src = survivor if src in gone else src
                new_tgt = survivor if tgt in gone else tgt
                if new_src != new_tgt:
                    self.link(q, new_src, new_tgt, relation, weight, created)

    # ------------------------------------------------------------------ dedup log
    def log_dedup(self, entry: NewDedupLog) -> None:
        # The texts pass the secret rules and lose <private> spans here, whoever wrote the
        # entry (issue #33): a model's reasoning may quote what it was shown.
        text = [None if t is None else for_llm(t) for t in (entry.new_text, entry.existing_text)]
        reasoning = None if entry.reasoning is None else for_llm(entry.reasoning)
        with self.db.write() as q:
            q.run(
                "INSERT INTO dedup_log (owner, new_text, existing_id, existing_text, similarity, "
                "decision, reasoning, review_status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.owner,
                    text[0],
                    entry.existing_id,
                    text[1],
                    entry.similarity,
                    Decision(entry.decision).value,
                    reasoning,
                    ReviewStatus(entry.review_status).value,
                    self.db.dialect.time_in(utcnow()),
                ),
            )

    def dedup_log(
        self, owner: str, *, decision: Decision | None = None, limit: int = 100
    ) -> list[DedupLogEntry]:
        where, args = "owner = ?", [owner]
        if decision is not None:
            where += " AND decision = ?"
            args.append(Decision(decision).value)
        with self.db.read() as q:
            rows = q.all(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE {where} ORDER BY id DESC LIMIT ?",
                [*args, int(limit)],
            )
        return [self.rows.entry(r) for r in rows]

    def dedup_entry(self, owner: str, entry_id: int) -> DedupLogEntry | None:
        with self.db.read() as q:
            row = q.one(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE id = ? AND owner = ?",
                (int(entry_id), owner),
            )
        return None if row is None else self.rows.entry(row)

    def pending_review(self, owner: str, *, limit: int = 100) -> list[DedupLogEntry]:
        with self.db.read() as q:
            rows = q.all(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE owner = ? AND review_status = ? "
                "ORDER BY id LIMIT ?",
                (owner, ReviewStatus.UNREVIEWED.value, int(limit)),
            )
        return [self.rows.entry(r) for r in rows]

    def set_review_status(self, owner: str, entry_id: int, status: ReviewStatus) -> DedupLogEntry:
        with self.db.write() as q:
            row = q.one(
                f"UPDATE dedup_log SET review_status = ? WHERE id = ? AND owner = ? "
                f"RETURNING {DEDUP_LOG_COLUMNS}",
                (ReviewStatus(status).value, int(entry_id), owner),
            )
        if row is None:
            raise NotFound(f"no dedup-log entry {entry_id} for owner {owner!r}")
        return self.rows.entry(row)
