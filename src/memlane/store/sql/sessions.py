"""Session tracking, written once for every backend (``sessions``, ``session_injections``,
``injection_events``, ``learn_cursors``). Contracts: :class:`~memlane.store.base.MemoryStore`.

:meth:`Sessions.advance_sql` upserts the session's row first: on PostgreSQL the row lock it takes
is held to the end of the turn's transaction, so concurrent turns of one session (two hook
processes, two servers) run their selection one after the other, each on what the other
committed; on SQLite the write lock does the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlane._ids import to_iso, utcnow
from memlane.store.sql.database import Database
from memlane.store.sql.dialect import Q
from memlane.types import ResetReason, SessionState

#: A statement and its parameters.
Statement = tuple[str, list[Any]]


class Sessions:
    """The session methods of the store over one :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------------ state
    @staticmethod
    def state_sql(owner: str, session: str) -> Statement:
        """The statement of :meth:`state` (its rows read by :meth:`state_of`): the session's
        row joined to its injected ids, in no particular order (``injected`` is a mapping;
        an ORDER BY cost SQLite a sort of the ~200 rows of a long session every turn)."""
        return (
            "SELECT s.turn, s.last_reset_at, s.last_reset_reason, s.updated_at, i.memory_id, "
            "i.turn FROM sessions s LEFT JOIN session_injections i ON i.owner = s.owner "
            "AND i.session = s.session WHERE s.owner = ? AND s.session = ?",
            [owner, session],
        )

    def state_of(self, owner: str, session: str, rows: Sequence[Sequence[Any]]) -> SessionState:
        """The state of the rows of :meth:`state_sql` (turn 0 and nothing injected for a
        session never seen)."""
        if not rows:
            return SessionState(owner, session, 0, {}, None, None, None)
        d = self.db.dialect
        first = rows[0]
        return SessionState(
            owner=owner,
            session=session,
            turn=int(first[0]),
            injected={r[4]: int(r[5]) for r in rows if r[4] is not None},
            last_reset_at=d.time_out(first[1]),
            last_reset_reason=first[2],
            updated_at=d.time_out(first[3]),
        )

    def state(self, q: Q, owner: str, session: str) -> SessionState:
        """The session's state on ``q``, in one statement."""
        return self.state_of(owner, session, q.all(*self.state_sql(owner, session)))

    def session(self, owner: str, session: str) -> SessionState:
        with self.db.read() as q:
            return self.state(q, owner, session)

    # ------------------------------------------------------------------ turns
    def advance_sql(self, owner: str, session: str, depth: int) -> list[Statement]:
        """Statements that increment the session's turn (creating the session) and prune its
        tracking older than ``2 * depth`` turns (the table stays bounded: injections long out
        of every in-flight turn's window). The upsert comes first: on PostgreSQL its row lock
        serialises concurrent turns of the session to the end of the transaction."""
        return [
            (
                "INSERT INTO sessions (owner, session, turn, updated_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (owner, session) DO UPDATE SET turn = sessions.turn + 1, "
                "updated_at = excluded.updated_at",
                [owner, session, self.db.dialect.time_in(utcnow())],
            ),
            (
                "DELETE FROM session_injections WHERE owner = ? AND session = ? AND turn <= "
                "(SELECT turn FROM sessions WHERE owner = ? AND session = ?) - ?",
                [owner, session, owner, session, 2 * int(depth)],
            ),
        ]

    def reset_session(self, owner: str, session: str, reason: ResetReason) -> SessionState:
        with self.db.transaction(), self.db.write() as q:
            now = self.db.dialect.time_in(utcnow())
            rows = q.batch(
                [
                    (
                        "INSERT INTO sessions (owner, session, turn, last_reset_at, "
                        "last_reset_reason, updated_at) VALUES (?, ?, 0, ?, ?, ?) "
                        "ON CONFLICT (owner, session) DO UPDATE SET "
                        "last_reset_at = excluded.last_reset_at, "
                        "last_reset_reason = excluded.last_reset_reason, "
                        "updated_at = excluded.updated_at",
                        [owner, session, now, ResetReason(reason).value, now],
                    ),
                    (
                        "DELETE FROM session_injections WHERE owner = ? AND session = ?",
                        [owner, session],
                    ),
                    (  # the turn model's records (memlane.injection.turn) start again too
                        "DELETE FROM session_turns WHERE owner = ? AND session = ?",
                        [owner, session],
                    ),
                    self.state_sql(owner, session),
                ]
            )
        return self.state_of(owner, session, rows[-1])

    # ------------------------------------------------------------------ the rest
    def learned_messages(self, owner: str, session: str) -> int:
        with self.db.read() as q:
            row = q.one(
                "SELECT learned FROM learn_cursors WHERE owner = ? AND session = ?",
                (owner, session),
            )
        return 0 if row is None else int(row[0])

    def set_learned_messages(self, owner: str, session: str, count: int) -> None:
        with self.db.transaction(), self.db.write() as q:
            q.defer(
                "INSERT INTO learn_cursors (owner, session, learned, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (owner, session) DO UPDATE SET "
                "learned = excluded.learned, updated_at = excluded.updated_at",
                (owner, session, int(count), self.db.dialect.time_in(utcnow())),
            )

    def sessions(self, owner: str, limit: int = 200) -> list[dict[str, Any]]:
        """``owner``'s sessions, most recently used first (see the contract)."""
        d = self.db.dialect
        with self.db.read() as q:
            rows = q.all(
                "SELECT s.session, s.turn, s.updated_at, s.last_reset_reason, "
                "(SELECT count(*) FROM injection_events e WHERE e.owner = s.owner "
                "AND e.session = s.session) FROM sessions s WHERE s.owner = ? "
                "ORDER BY s.updated_at DESC LIMIT ?",
                (owner, int(limit)),
            )
        return [
            {
                "session": r[0],
                "turn": int(r[1]),
                "updated_at": to_iso(d.time_out(r[2])),  # type: ignore[arg-type]
                "last_reset_reason": r[3],
                "events": int(r[4]),
            }
            for r in rows
        ]

    def injection_events(self, owner: str, session: str, limit: int = 50) -> list[dict[str, Any]]:
        d = self.db.dialect
        with self.db.read() as q:
            rows = q.all(
                "SELECT turn, memory_ids, skipped, elapsed_ms, created_at FROM injection_events "
                "WHERE owner = ? AND session = ? ORDER BY id DESC LIMIT ?",
                (owner, session, int(limit)),
            )
        return [
            {
                "turn": int(r[0]),
                "memory_ids": list(d.json_out(r[1])),
                "skipped": dict(d.json_out(r[2])),
                "elapsed_ms": float(r[3]),
                "created_at": to_iso(d.time_out(r[4])),  # type: ignore[arg-type]
            }
            for r in rows
        ]
