"""The janitor's and the review's methods of the SQLite store: candidate pairs, cluster merges and
dedup-log review. A mixin of :class:`~memlane.store.sqlite.store.SQLiteStore`, which supplies the
connection, the lock, the index cache and the row helpers. Contracts:
:class:`~memlane.store.base.MemoryStore`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memlane._ids import from_iso, to_iso, utcnow
from memlane.errors import NotFound
from memlane.store.base import (
    DEDUP_LOG_COLUMNS,
    Candidates,
    ClusterMerge,
    dedup_entry_of,
    iter_chunks,
)
from memlane.store.candidates import candidate_pairs
from memlane.store.sqlite.rows import SET_STATUS_SQL, merge_metadata
from memlane.types import ChangeReason, DedupLogEntry, Memory, ReviewStatus, Status

if TYPE_CHECKING:
    import sqlite3
    import threading

    from memlane.store.index_cache import IndexCache


def _entry(r: Sequence[Any]) -> DedupLogEntry:
    return dedup_entry_of(r, from_iso(r[9]))  # type: ignore[arg-type]


class MaintenanceMixin:
    """Janitor merges and dedup-log review over SQLite."""

    if TYPE_CHECKING:
        _conn: sqlite3.Connection
        _lock: threading.RLock
        _cache: IndexCache

        def _require_tx(self) -> None: ...

        def _require(self, owner: str, memory_id: str) -> tuple[int, Memory]: ...

        def _add_history(self, old: Memory, reason: ChangeReason) -> None: ...

        def _next_seq(self) -> int: ...

    # ------------------------------------------------------------------ janitor
    def candidate_pairs(
        self,
        owner: str,
        *,
        neighbours: int,
        min_similarity: float,
        max_df: int,
        progress: Callable[[int, int], None] | None = None,
    ) -> Candidates:
        with self._lock:
            return candidate_pairs(
                self._cache,
                owner,
                neighbours=neighbours,
                min_similarity=min_similarity,
                max_df=max_df,
                progress=progress,
            )

    def merge_memories(self, owner: str, merge: ClusterMerge) -> Memory:
        with self._lock:
            self._require_tx()
            num, survivor = self._require(owner, merge.survivor)
            absorbed = [self._require(owner, mid) for mid in merge.absorbed]
            reason = ChangeReason(merge.reason)
            if merge.content != survivor.content:
                self._add_history(survivor, reason)
            for _, member in absorbed:
                # the member's text in the survivor's history: reachable from the one that lives on
                self._add_history(dataclasses.replace(member, id=survivor.id), reason)
            now = to_iso(utcnow())
            self._conn.execute(
                "UPDATE memories SET content = ?, content_hash = ?, embedding = ?, importance = ?, "
                "created_at = ?, confirmations = ?, metadata = ?, updated_at = ?, vec_seq = ? "
                "WHERE num = ?",
                (
                    merge.content,
                    merge.content_hash,
                    np.asarray(merge.embedding, dtype=np.float32).tobytes(),
                    float(merge.importance),
                    to_iso(merge.created_at),
                    int(merge.confirmations),
                    json.dumps(dict(merge.metadata), ensure_ascii=False),
                    now,
                    self._next_seq(),
                    num,
                ),
            )
            self._cache.note_pending(owner, num, survivor.agent, merge.embedding)
            for member_num, member in absorbed:
                meta = merge_metadata(member.metadata, {"merged_into": survivor.id})
                self._conn.execute(
                    "UPDATE memories SET metadata = ? WHERE num = ?",
                    (json.dumps(meta, ensure_ascii=False), member_num),
                )
                self._conn.execute(
                    SET_STATUS_SQL, (Status.SUPERSEDED.value, now, self._next_seq(), member_num)
                )
            self._repoint(survivor.id, [m.id for _, m in absorbed])
            return self._require(owner, survivor.id)[1]

    def _repoint(self, survivor: str, absorbed: Sequence[str]) -> None:
        """Move every link touching an absorbed member to the survivor (an existing link keeps
        the larger weight; links inside the cluster, now loops, are dropped)."""
        gone = set(absorbed)
        for chunk in iter_chunks(list(absorbed)):
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                "SELECT source_id, target_id, relation, weight, created_at FROM associations "
                f"WHERE source_id IN ({marks}) OR target_id IN ({marks})",
                [*chunk, *chunk],
            ).fetchall()
            for src, tgt, relation, weight, created in rows:
                self._conn.execute(
                    "DELETE FROM associations WHERE source_id = ? AND target_id = ? "
                    "AND relation = ?",
                    (src, tgt, relation),
                )
                new_src = survivor if src in gone else src
                new_tgt = survivor if tgt in gone else tgt
                if new_src == new_tgt:
                    continue
                self._conn.execute(
                    "INSERT INTO associations (source_id, target_id, relation, weight, "
                    "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (source_id, target_id, "
                    "relation) DO UPDATE SET weight = max(weight, excluded.weight)",
                    (new_src, new_tgt, relation, weight, created),
                )

    # ------------------------------------------------------------------ review
    def dedup_entry(self, owner: str, entry_id: int) -> DedupLogEntry | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE id = ? AND owner = ?",
                (int(entry_id), owner),
            ).fetchone()
        return None if row is None else _entry(row)

    def pending_review(self, owner: str, *, limit: int = 100) -> list[DedupLogEntry]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE owner = ? AND review_status = ? "
                "ORDER BY id LIMIT ?",
                (owner, ReviewStatus.UNREVIEWED.value, int(limit)),
            ).fetchall()
        return [_entry(r) for r in rows]

    def set_review_status(self, owner: str, entry_id: int, status: ReviewStatus) -> DedupLogEntry:
        with self._lock:
            self._require_tx()
            cur = self._conn.execute(
                "UPDATE dedup_log SET review_status = ? WHERE id = ? AND owner = ?",
                (ReviewStatus(status).value, int(entry_id), owner),
            )
            if cur.rowcount == 0:
                raise NotFound(f"no dedup-log entry {entry_id} for owner {owner!r}")
            found = self.dedup_entry(owner, entry_id)
            assert found is not None
            return found
