"""Session tracking of the SQLite store (``sessions``, ``session_injections``,
``injection_events``): a mixin of :class:`~memlane.store.sqlite.store.SQLiteStore`, which supplies
the connection, the lock and :meth:`transaction`. Contracts: :class:`~memlane.store.base.MemoryStore`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlane._ids import from_iso, to_iso, utcnow
from memlane.types import ResetReason, SessionState

if TYPE_CHECKING:
    import sqlite3
    import threading
    from contextlib import AbstractContextManager


class SessionsMixin:
    """The session methods of :class:`~memlane.store.base.MemoryStore` over SQLite."""

    if TYPE_CHECKING:
        _conn: sqlite3.Connection
        _lock: threading.RLock

        def transaction(self) -> AbstractContextManager[None]: ...

    def session(self, owner: str, session: str) -> SessionState:
        with self._lock:
            row = self._conn.execute(
                "SELECT turn, last_reset_at, last_reset_reason, updated_at FROM sessions "
                "WHERE owner = ? AND session = ?",
                (owner, session),
            ).fetchone()
            injected = dict(
                self._conn.execute(
                    "SELECT memory_id, turn FROM session_injections WHERE owner = ? AND session = ? "
                    "ORDER BY turn",
                    (owner, session),
                ).fetchall()
            )
        if row is None:
            return SessionState(owner, session, 0, {}, None, None, None)
        return SessionState(
            owner=owner,
            session=session,
            turn=int(row[0]),
            injected=injected,
            last_reset_at=from_iso(row[1]),
            last_reset_reason=row[2],
            updated_at=from_iso(row[3]),
        )

    def learned_messages(self, owner: str, session: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT learned FROM learn_cursors WHERE owner = ? AND session = ?",
                (owner, session),
            ).fetchone()
        return 0 if row is None else int(row[0])

    def set_learned_messages(self, owner: str, session: str, count: int) -> None:
        with self.transaction():
            self._conn.execute(
                "INSERT INTO learn_cursors (owner, session, learned, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (owner, session) DO UPDATE SET "
                "learned = excluded.learned, updated_at = excluded.updated_at",
                (owner, session, int(count), to_iso(utcnow())),
            )

    def begin_turn(self, owner: str, session: str, depth: int) -> SessionState:
        with self.transaction():
            now = to_iso(utcnow())
            self._conn.execute(
                "INSERT INTO sessions (owner, session, turn, updated_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (owner, session) DO UPDATE SET turn = turn + 1, updated_at = excluded.updated_at",
                (owner, session, now),
            )
            turn = int(
                self._conn.execute(
                    "SELECT turn FROM sessions WHERE owner = ? AND session = ?", (owner, session)
                ).fetchone()[0]
            )
            # Bounded: forget injections long out of every in-flight turn's window.
            self._conn.execute(
                "DELETE FROM session_injections WHERE owner = ? AND session = ? AND turn <= ?",
                (owner, session, turn - 2 * depth),
            )
        return self.session(owner, session)

    def record_injection(
        self,
        owner: str,
        session: str,
        turn: int,
        memory_ids: Sequence[str],
        event: Mapping[str, Any],
    ) -> None:
        with self.transaction():
            self._conn.executemany(
                "INSERT INTO session_injections (owner, session, memory_id, turn) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (owner, session, memory_id) DO UPDATE SET turn = max(turn, excluded.turn)",
                [(owner, session, mid, turn) for mid in memory_ids],
            )
            self._conn.execute(
                "INSERT INTO injection_events (owner, session, turn, memory_ids, skipped, elapsed_ms, "
                "query, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    owner,
                    session,
                    turn,
                    json.dumps(list(memory_ids)),
                    json.dumps(dict(event.get("skipped", {}))),
                    float(event.get("elapsed_ms", 0.0)),
                    event.get("query"),
                    to_iso(utcnow()),
                ),
            )

    def reset_session(self, owner: str, session: str, reason: ResetReason) -> SessionState:
        with self.transaction():
            now = to_iso(utcnow())
            self._conn.execute(
                "INSERT INTO sessions (owner, session, turn, last_reset_at, last_reset_reason, updated_at) "
                "VALUES (?, ?, 0, ?, ?, ?) ON CONFLICT (owner, session) DO UPDATE SET "
                "last_reset_at = excluded.last_reset_at, last_reset_reason = excluded.last_reset_reason, "
                "updated_at = excluded.updated_at",
                (owner, session, now, ResetReason(reason).value, now),
            )
            self._conn.execute(
                "DELETE FROM session_injections WHERE owner = ? AND session = ?", (owner, session)
            )
        return self.session(owner, session)

    def session_memory_ids(self, owner: str, session: str, since: datetime | None) -> set[str]:
        sql = "SELECT id FROM memories WHERE owner = ? AND session = ? AND status = 'active'"
        args: list[Any] = [owner, session]
        if since is not None:
            sql += " AND created_at > ?"
            args.append(to_iso(since))
        with self._lock:
            return {r[0] for r in self._conn.execute(sql, args)}

    def sessions(self, owner: str, limit: int = 200) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT s.session, s.turn, s.updated_at, s.last_reset_reason, "
                "(SELECT count(*) FROM injection_events e WHERE e.owner = s.owner "
                "AND e.session = s.session) FROM sessions s WHERE s.owner = ? "
                "ORDER BY s.updated_at DESC LIMIT ?",
                (owner, int(limit)),
            ).fetchall()
        keys = ("session", "turn", "updated_at", "last_reset_reason", "events")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def agent_counts(self) -> list[tuple[str, str | None, int]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT owner, agent, count(*) FROM memories WHERE status = 'active' "
                "GROUP BY owner, agent ORDER BY owner, agent"
            ).fetchall()
        return [(r[0], r[1], int(r[2])) for r in rows]

    def injection_events(self, owner: str, session: str, limit: int = 50) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT turn, memory_ids, skipped, elapsed_ms, created_at FROM injection_events "
                "WHERE owner = ? AND session = ? ORDER BY id DESC LIMIT ?",
                (owner, session, int(limit)),
            ).fetchall()
        return [
            {
                "turn": int(r[0]),
                "memory_ids": json.loads(r[1]),
                "skipped": json.loads(r[2]),
                "elapsed_ms": float(r[3]),
                "created_at": r[4],
            }
            for r in rows
        ]
