"""Session tracking of the PostgreSQL store (``sessions``, ``session_injections``,
``injection_events``, ``learn_cursors``): a mixin of
:class:`~memlane.store.postgres.store.PostgresStore`. Contracts:
:class:`~memlane.store.base.MemoryStore`.

:meth:`SessionsMixin.begin_turn` upserts the session's row first: the row lock it takes is held
to the end of the turn's transaction, so concurrent turns of one session (two hook processes,
two servers) run their selection one after the other, each on what the other committed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlane._ids import to_iso, utcnow
from memlane.store.postgres.rows import utc
from memlane.types import ResetReason, SessionState

if TYPE_CHECKING:
    import psycopg


class SessionsMixin:
    """The session methods of :class:`~memlane.store.base.MemoryStore` over PostgreSQL."""

    if TYPE_CHECKING:

        def _use(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

        def _require_tx(self) -> psycopg.Connection[Any]: ...

        def transaction(self) -> AbstractContextManager[None]: ...

    def session(self, owner: str, session: str) -> SessionState:
        with self._use() as conn:
            row = conn.execute(
                "SELECT turn, last_reset_at, last_reset_reason, updated_at, "
                "ARRAY(SELECT memory_id FROM session_injections i WHERE i.owner = s.owner "
                "AND i.session = s.session ORDER BY turn, memory_id), "
                "ARRAY(SELECT turn FROM session_injections i WHERE i.owner = s.owner "
                "AND i.session = s.session ORDER BY turn, memory_id) "
                "FROM sessions s WHERE owner = %s AND session = %s",
                (owner, session),
            ).fetchone()
        if row is None:
            return SessionState(owner, session, 0, {}, None, None, None)
        return SessionState(
            owner=owner,
            session=session,
            turn=int(row[0]),
            injected=dict(zip(row[4], map(int, row[5]), strict=True)),
            last_reset_at=utc(row[1]),
            last_reset_reason=row[2],
            updated_at=utc(row[3]),
        )

    def learned_messages(self, owner: str, session: str) -> int:
        with self._use() as conn:
            row = conn.execute(
                "SELECT learned FROM learn_cursors WHERE owner = %s AND session = %s",
                (owner, session),
            ).fetchone()
        return 0 if row is None else int(row[0])

    def set_learned_messages(self, owner: str, session: str, count: int) -> None:
        with self.transaction():
            self._require_tx().execute(
                "INSERT INTO learn_cursors (owner, session, learned, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (owner, session) DO UPDATE SET "
                "learned = excluded.learned, updated_at = excluded.updated_at",
                (owner, session, int(count), utcnow()),
            )

    def begin_turn(self, owner: str, session: str, depth: int) -> SessionState:
        with self.transaction():
            conn = self._require_tx()
            row = conn.execute(
                "INSERT INTO sessions (owner, session, turn, updated_at) VALUES (%s, %s, 1, %s) "
                "ON CONFLICT (owner, session) DO UPDATE SET turn = sessions.turn + 1, "
                "updated_at = excluded.updated_at RETURNING turn",
                (owner, session, utcnow()),
            ).fetchone()
            assert row is not None
            # Bounded: forget injections long out of every in-flight turn's window.
            conn.execute(
                "DELETE FROM session_injections WHERE owner = %s AND session = %s AND turn <= %s",
                (owner, session, int(row[0]) - 2 * depth),
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
            conn = self._require_tx()
            if memory_ids:
                conn.execute(
                    "INSERT INTO session_injections (owner, session, memory_id, turn) "
                    "SELECT %s, %s, m, %s FROM unnest(%s::text[]) AS m "
                    "ON CONFLICT (owner, session, memory_id) DO UPDATE SET "
                    "turn = GREATEST(session_injections.turn, excluded.turn)",
                    (owner, session, turn, list(dict.fromkeys(memory_ids))),
                )
            conn.execute(
                "INSERT INTO injection_events (owner, session, turn, memory_ids, skipped, "
                "elapsed_ms, query, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    owner,
                    session,
                    turn,
                    json.dumps(list(memory_ids)),
                    json.dumps(dict(event.get("skipped", {}))),
                    float(event.get("elapsed_ms", 0.0)),
                    event.get("query"),
                    utcnow(),
                ),
            )

    def reset_session(self, owner: str, session: str, reason: ResetReason) -> SessionState:
        with self.transaction():
            conn = self._require_tx()
            now = utcnow()
            conn.execute(
                "INSERT INTO sessions (owner, session, turn, last_reset_at, last_reset_reason, "
                "updated_at) VALUES (%s, %s, 0, %s, %s, %s) ON CONFLICT (owner, session) DO "
                "UPDATE SET last_reset_at = excluded.last_reset_at, "
                "last_reset_reason = excluded.last_reset_reason, updated_at = excluded.updated_at",
                (owner, session, now, ResetReason(reason).value, now),
            )
            conn.execute(
                "DELETE FROM session_injections WHERE owner = %s AND session = %s",
                (owner, session),
            )
            return self.session(owner, session)

    def session_memory_ids(self, owner: str, session: str, since: datetime | None) -> set[str]:
        sql = "SELECT id FROM memories WHERE owner = %s AND session = %s AND status = 'active'"
        args: list[Any] = [owner, session]
        if since is not None:
            sql += " AND created_at > %s"
            args.append(since)
        with self._use() as conn:
            return {r[0] for r in conn.execute(sql, args).fetchall()}

    def sessions(self, owner: str, limit: int = 200) -> list[dict[str, Any]]:
        with self._use() as conn:
            rows = conn.execute(
                "SELECT s.session, s.turn, s.updated_at, s.last_reset_reason, "
                "(SELECT count(*) FROM injection_events e WHERE e.owner = s.owner "
                "AND e.session = s.session) FROM sessions s WHERE s.owner = %s "
                "ORDER BY s.updated_at DESC LIMIT %s",
                (owner, int(limit)),
            ).fetchall()
        return [
            {
                "session": r[0],
                "turn": int(r[1]),
                "updated_at": to_iso(r[2]),
                "last_reset_reason": r[3],
                "events": int(r[4]),
            }
            for r in rows
        ]

    def agent_counts(self) -> list[tuple[str, str | None, int]]:
        with self._use() as conn:
            rows = conn.execute(
                "SELECT owner, agent, count(*) FROM memories WHERE status = 'active' "
                "GROUP BY owner, agent ORDER BY owner, agent"
            ).fetchall()
        return [(r[0], r[1], int(r[2])) for r in rows]

    def injection_events(self, owner: str, session: str, limit: int = 50) -> list[dict[str, Any]]:
        with self._use() as conn:
            rows = conn.execute(
                "SELECT turn, memory_ids, skipped, elapsed_ms, created_at FROM injection_events "
                "WHERE owner = %s AND session = %s ORDER BY id DESC LIMIT %s",
                (owner, session, int(limit)),
            ).fetchall()
        return [
            {
                "turn": int(r[0]),
                "memory_ids": list(r[1]),
                "skipped": dict(r[2]),
                "elapsed_ms": float(r[3]),
                "created_at": to_iso(r[4]),
            }
            for r in rows
        ]
