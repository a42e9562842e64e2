"""The janitor's and the review's methods of the PostgreSQL store: candidate pairs, cluster merges
and dedup-log review. A mixin of :class:`~memlane.store.postgres.store.PostgresStore`, which
supplies the pool, the transaction's connection, the owner lock and the BM25/vector caches.
Contracts: :class:`~memlane.store.base.MemoryStore`; the SQLite twin is
:mod:`memlane.store.sqlite.maintenance`.

Candidate pairs come from the backend-neutral caches (:mod:`memlane.store.candidates`), caught up
from ``change_seq`` like every search, so both backends propose the same pairs for the same rows.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np

from memlane._ids import utcnow
from memlane.errors import NotFound
from memlane.store.base import DEDUP_LOG_COLUMNS, Candidates, ClusterMerge, dedup_entry_of
from memlane.store.candidates import candidate_pairs
from memlane.store.postgres.rows import MEMORY_COLUMNS, row_to_memory, utc
from memlane.store.sqlite.rows import merge_metadata
from memlane.types import ChangeReason, DedupLogEntry, Memory, ReviewStatus, Status

if TYPE_CHECKING:
    import psycopg

    from memlane.store.index_cache import IndexCache


def _entry(r: Sequence[Any]) -> DedupLogEntry:
    return dedup_entry_of(r, utc(r[9]))  # type: ignore[arg-type]


def _add_history(conn: psycopg.Connection[Any], memory: Memory, reason: ChangeReason) -> None:
    """``memory``'s current text as the next version of ``memory.id``'s history."""
    conn.execute(
        "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, "
        "replaced_at) SELECT %s, coalesce(max(version), 0) + 1, %s, %s, %s, %s "
        "FROM memory_history WHERE memory_id = %s",
        (memory.id, memory.content, memory.content_hash, reason.value, utcnow(), memory.id),
    )


class MaintenanceMixin:
    """Janitor merges and dedup-log review over PostgreSQL."""

    if TYPE_CHECKING:
        _cache: IndexCache
        _cache_lock: threading.RLock

        def _use(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

        def _require_tx(self) -> psycopg.Connection[Any]: ...

        def _lock_owner(self, conn: psycopg.Connection[Any], owner: str) -> None: ...

        def _require(
            self, conn: psycopg.Connection[Any], owner: str, memory_id: str
        ) -> tuple[int, Memory]: ...

        def set_status(self, owner: str, memory_id: str, status: Status) -> Memory: ...

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
        with self._cache_lock:
            return candidate_pairs(
                self._cache,
                owner,
                neighbours=neighbours,
                min_similarity=min_similarity,
                max_df=max_df,
                progress=progress,
            )

    def merge_memories(self, owner: str, merge: ClusterMerge) -> Memory:
        conn = self._require_tx()
        self._lock_owner(conn, owner)
        num, survivor = self._require(conn, owner, merge.survivor)
        absorbed = [self._require(conn, owner, mid)[1] for mid in merge.absorbed]
        reason = ChangeReason(merge.reason)
        if merge.content != survivor.content:
            _add_history(conn, survivor, reason)
        for member in absorbed:
            # the member's text in the survivor's history: reachable from the one that lives on
            _add_history(conn, dataclasses.replace(member, id=survivor.id), reason)
        conn.execute(
            "UPDATE memories SET content = %s, content_hash = %s, embedding = %s, "
            "importance = %s, created_at = %s, confirmations = %s, metadata = %s, "
            "updated_at = %s, change_seq = nextval('memories_change_seq') WHERE num = %s",
            (
                merge.content,
                merge.content_hash,
                np.asarray(merge.embedding, dtype=np.float32),
                float(merge.importance),
                merge.created_at,
                int(merge.confirmations),
                json.dumps(dict(merge.metadata), ensure_ascii=False),
                utcnow(),
                num,
            ),
        )
        for member in absorbed:
            meta = merge_metadata(member.metadata, {"merged_into": survivor.id})
            conn.execute(
                "UPDATE memories SET metadata = %s WHERE id = %s AND owner = %s",
                (json.dumps(meta, ensure_ascii=False), member.id, owner),
            )
            self.set_status(owner, member.id, Status.SUPERSEDED)
        self._repoint(conn, survivor.id, [m.id for m in absorbed])
        row = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE num = %s", (num,)
        ).fetchone()
        assert row is not None
        return row_to_memory(row)

    @staticmethod
    def _repoint(conn: psycopg.Connection[Any], survivor: str, absorbed: Sequence[str]) -> None:
        """Move every link touching an absorbed member to the survivor (an existing link keeps
        the larger weight; links inside the cluster, now loops, are dropped)."""
        gone = set(absorbed)
        rows = conn.execute(
            "DELETE FROM associations WHERE source_id = ANY(%(m)s::text[]) "
            "OR target_id = ANY(%(m)s::text[]) "
            "RETURNING source_id, target_id, relation, weight, created_at",
            {"m": list(absorbed)},
        ).fetchall()
        for src, tgt, relation, weight, created in rows:
            new_src = survivor if src in gone else src
            new_tgt = survivor if tgt in gone else tgt
            if new_src == new_tgt:
                continue
            conn.execute(
                "INSERT INTO associations (source_id, target_id, relation, weight, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (source_id, target_id, relation) "
                "DO UPDATE SET weight = GREATEST(associations.weight, excluded.weight)",
                (new_src, new_tgt, relation, weight, created),
            )

    # ------------------------------------------------------------------ review
    def dedup_entry(self, owner: str, entry_id: int) -> DedupLogEntry | None:
        with self._use() as conn:
            row = conn.execute(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE id = %s AND owner = %s",
                (int(entry_id), owner),
            ).fetchone()
        return None if row is None else _entry(row)

    def pending_review(self, owner: str, *, limit: int = 100) -> list[DedupLogEntry]:
        with self._use() as conn:
            rows = conn.execute(
                f"SELECT {DEDUP_LOG_COLUMNS} FROM dedup_log WHERE owner = %s AND review_status = %s "
                "ORDER BY id LIMIT %s",
                (owner, ReviewStatus.UNREVIEWED.value, int(limit)),
            ).fetchall()
        return [_entry(r) for r in rows]

    def set_review_status(self, owner: str, entry_id: int, status: ReviewStatus) -> DedupLogEntry:
        conn = self._require_tx()
        row = conn.execute(
            f"UPDATE dedup_log SET review_status = %s WHERE id = %s AND owner = %s "
            f"RETURNING {DEDUP_LOG_COLUMNS}",
            (ReviewStatus(status).value, int(entry_id), owner),
        ).fetchone()
        if row is None:
            raise NotFound(f"no dedup-log entry {entry_id} for owner {owner!r}")
        return _entry(row)
