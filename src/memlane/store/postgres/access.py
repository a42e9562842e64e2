"""Buffered access counts of the PostgreSQL store (``access_count``, ``last_accessed_at``): a
mixin of :class:`~memlane.store.postgres.store.PostgresStore`. Contract:
:meth:`~memlane.store.base.MemoryStore.record_access`."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from memlane._ids import utcnow

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

#: Flush when this many (owner, id) counts are buffered, or the oldest is this many seconds old.
_ACCESS_FLUSH_EVERY = 256
_ACCESS_FLUSH_SECONDS = 5.0


class AccessMixin:
    """``record_access`` and its flushes."""

    if TYPE_CHECKING:
        _pool: ConnectionPool
        _tx: threading.local

    def _init_access(self) -> None:
        self._access_lock = threading.Lock()
        self._access: dict[tuple[str, str], tuple[int, Any]] = {}
        self._access_since = time.monotonic()

    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        now = utcnow()
        with self._access_lock:
            for mid in ids:
                count, _ = self._access.get((owner, mid), (0, now))
                self._access[(owner, mid)] = (count + 1, now)
        self._flush_access()

    def _flush_access(self, *, force: bool = False, due: bool = False) -> None:
        """Write the buffered access counts in one statement of their own (never inside a write
        transaction: their row locks would widen its footprint and could deadlock with another
        writer). Rows in order of ``num``; an opportunistic flush skips rows another writer has
        locked (``SKIP LOCKED``) and keeps their counts for the next flush; ``force`` (close)
        waits for them. Counts of ids that are not the owner's are dropped."""
        if getattr(self._tx, "conn", None) is not None:
            return
        with self._access_lock:
            due = (
                due
                or len(self._access) >= _ACCESS_FLUSH_EVERY
                or (time.monotonic() - self._access_since >= _ACCESS_FLUSH_SECONDS)
            )
            if not self._access or not (force or due):
                if not self._access:
                    self._access_since = time.monotonic()
                return
            taken, self._access = self._access, {}
            self._access_since = time.monotonic()
        keys = sorted(taken)
        try:
            with self._pool.connection() as conn:
                done = conn.execute(
                    "WITH v AS (SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], "
                    "%s::timestamptz[]) AS v(owner, id, c, ts)), "
                    # "m.id = ANY(...)": the planner cannot size unnest() and joined it
                    # to a scan of every memory (13.8 ms a flush at 20,000 memories, one
                    # flush per injection turn); the ids read through their index instead
                    "free AS (SELECT m.num, v.c, v.ts FROM memories m JOIN v "
                    "ON m.id = v.id AND m.owner = v.owner WHERE m.id = ANY(%s::text[]) "
                    "ORDER BY m.num "
                    f"FOR UPDATE OF m {'' if force else 'SKIP LOCKED'}) "
                    "UPDATE memories m SET access_count = m.access_count + free.c, "
                    "last_accessed_at = GREATEST(m.last_accessed_at, free.ts) FROM free "
                    "WHERE m.num = free.num RETURNING m.owner, m.id",
                    (
                        [o for o, _ in keys],
                        [i for _, i in keys],
                        [taken[k][0] for k in keys],
                        [taken[k][1] for k in keys],
                        [i for _, i in keys],
                    ),
                ).fetchall()
                for key in done:
                    taken.pop(tuple(key), None)  # type: ignore[arg-type]
                for key in keys:  # ids that are not (or no longer) the owner's: dropped
                    if key in taken and not self._exists(conn, key):
                        taken.pop(key)
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == "25006":  # a read replica: counts stay there
                taken.clear()
            elif force:
                raise
        finally:
            if taken:
                with self._access_lock:  # rows another writer had locked: next time
                    for key, (count, ts) in taken.items():
                        old, old_ts = self._access.get(key, (0, ts))
                        self._access[key] = (old + count, max(ts, old_ts))

    @staticmethod
    def _exists(conn: psycopg.Connection[Any], key: tuple[str, str]) -> bool:
        row = conn.execute(
            "SELECT 1 FROM memories WHERE owner = %s AND id = %s", (key[0], key[1])
        ).fetchone()
        return row is not None
