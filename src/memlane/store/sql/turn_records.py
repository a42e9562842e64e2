"""The turn model's records (``session_turns``, :mod:`memlane.injection.turn`), written once for
every backend. A record holds a turn's key digest, position, injection turn number and block
memory ids, never text. :meth:`~memlane.store.sql.sessions.Sessions.reset_session` and a
whole-owner purge drop them too. Contracts: :class:`~memlane.store.base.MemoryStore`."""

from __future__ import annotations

import json

from memlane._ids import utcnow
from memlane.store.records import SessionTurn
from memlane.store.sql.database import Database


class TurnRecords:
    """``session_turns`` over one :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def session_turns(self, owner: str, session: str) -> list[SessionTurn]:
        d = self.db.dialect
        with self.db.read() as q:
            rows = q.all(
                "SELECT key, position, turn, items FROM session_turns "
                "WHERE owner = ? AND session = ? ORDER BY turn, key",
                (owner, session),
            )
        return [
            SessionTurn(
                key=str(r[0]),
                position=None if r[1] is None else int(r[1]),
                turn=int(r[2]),
                items=tuple(
                    (str(i[0]), str(i[1]), None if i[2] is None else str(i[2]), float(i[3]))
                    for i in d.json_out(r[3])
                ),
            )
            for r in rows
        ]

    def record_session_turn(
        self, owner: str, session: str, record: SessionTurn, keep_from: int
    ) -> None:
        d = self.db.dialect
        items = json.dumps([list(i) for i in record.items])
        with self.db.transaction(), self.db.write() as q:
            q.run(
                "DELETE FROM session_turns WHERE owner = ? AND session = ? AND turn < ?",
                (owner, session, int(keep_from)),
            )
            q.run(
                "INSERT INTO session_turns (owner, session, key, position, turn, items, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (owner, session, key) "
                "DO UPDATE SET position = excluded.position, turn = excluded.turn, "
                "items = excluded.items, created_at = excluded.created_at",
                (
                    owner,
                    session,
                    record.key,
                    record.position,
                    int(record.turn),
                    items,
                    d.time_in(utcnow()),
                ),
            )
