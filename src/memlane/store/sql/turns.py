"""An injection turn's store work in whole steps (written once for every backend): what the
injection reads before its search (:meth:`Turns.turn_context`), the start of the turn's write
transaction with everything the selection needs (:meth:`Turns.start_turn`), and what the turn
recorded (:meth:`Turns.finish_turn`). Each step is one round trip on a backend that pipelines
(PostgreSQL: its statements travel together; ``BEGIN`` with the start, ``COMMIT`` with the
record); on SQLite, a few statements in process. Contracts:
:meth:`~memlane.store.base.MemoryStore.turn_context` and the two after it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memlane._ids import utcnow
from memlane.store.base import CHUNK, PinnedQuery, TurnContext, TurnStart, Vector
from memlane.store.records import TurnRecord
from memlane.store.sql.database import Database
from memlane.store.sql.memories import Memories
from memlane.store.sql.sessions import Sessions, Statement


class Turns:
    """The injection's whole steps over one :class:`Database`."""

    def __init__(self, db: Database, sessions: Sessions, memories: Memories) -> None:
        self.db = db
        self.sessions = sessions
        self.memories = memories

    def turn_context(
        self, owner: str, session: str, agent: str | None, pinned: PinnedQuery | None
    ) -> TurnContext:
        """The session's memories since the last reset and the pinned memories: one batch of
        reads."""
        with self.db.read() as q:
            rows = q.batch(self.context_sql(owner, session, agent, pinned))
        return self.context_of(owner, session, rows)

    def context_sql(
        self, owner: str, session: str, agent: str | None, pinned: PinnedQuery | None
    ) -> list[Statement]:
        """:meth:`turn_context`'s statements, for a batch (a search step sends them with its
        own first reads); :meth:`context_of` reads their rows."""
        statements = [self.memories.since_reset_sql(owner, session)]
        if pinned is not None and pinned.types and pinned.limit > 0:
            statements.append(
                self.memories.pinned_sql(
                    owner, agent, pinned.types, pinned.limit, pinned.sort, pinned.project
                )
            )
        return statements

    def context_of(
        self, owner: str, session: str, rows: Sequence[Sequence[Sequence[Any]]]
    ) -> TurnContext:
        """The :class:`TurnContext` of the rows of :meth:`context_sql`'s statements."""
        return TurnContext(
            same_session={str(r[0]) for r in rows[0]},
            pinned=[self.memories.rows.memory(r) for r in rows[1]] if len(rows) > 1 else [],
        )

    def start_turn(
        self, owner: str, session: str, depth: int, candidates: Sequence[str]
    ) -> TurnStart:
        """In the open write transaction (or its own): advance the session's turn (and prune),
        then read its state, its memories since the last reset, and the embeddings of the
        memories it injected within ``depth`` turns and of ``candidates``: one batch."""
        d = self.db.dialect
        # Two lookups by id joined with UNION ALL, never one WHERE with "id IN (...) OR id IN
        # (...)": PostgreSQL's planner cannot use the id index for that OR and read every memory
        # of the owner (a sequential scan: 85 ms a turn at 93,641 memories, idle; 0.6 ms as two
        # index scans). A memory in both halves comes twice: the same row, read into one dict.
        # The window's memories only (injected within ``depth`` turns of the new one, as
        # injected_within counts): the table keeps 2 * depth turns, and the older half's
        # embeddings were read, parsed and stacked every turn for nothing (~360 rows a turn
        # at the bench's 25 turns a session, ~180 of them out of the window).
        vector_sql = (
            f"SELECT id, embedding FROM memories WHERE {d.owner_filter} = ? AND id IN "
            "(SELECT memory_id FROM session_injections WHERE owner = ? AND session = ? "
            "AND turn > (SELECT turn FROM sessions WHERE owner = ? AND session = ?) - ?)"
        )
        args: list[Any] = [owner, owner, session, owner, session, int(depth)]
        wanted = list(dict.fromkeys(candidates))
        chunks = list(d.chunks(wanted))
        first = chunks[0] if chunks else []
        if first:
            cond, more = d.in_list("id", first)
            vector_sql += (
                f" UNION ALL SELECT id, embedding FROM memories "
                f"WHERE {d.owner_filter} = ? AND {cond}"
            )
            args.extend([owner, *more])
        # The turn's writes are bookkeeping (what the session was shown, its event row): the
        # transaction that starts a turn commits without waiting for the disk on every backend
        # (Dialect.async_commit_sql: 1.6-5 ms an fsync here, the same guarantee as SQLite's);
        # a turn lost with a crashed server shows its memories once more, nothing worse.
        relaxed = [(d.async_commit_sql, None)] if d.async_commit_sql else []
        with self.db.transaction(), self.db.write() as q:
            rows = q.batch(
                [
                    *relaxed,
                    *self.sessions.advance_sql(owner, session, depth),
                    self.sessions.state_sql(owner, session),
                    self.memories.since_reset_sql(owner, session),
                    (vector_sql, args),
                ],
                binary=True,
            )
            vectors: dict[str, Vector] = {str(r[0]): d.vec_out(r[1]) for r in rows[-1]}
            if len(chunks) > 1:  # more candidates than one statement takes (SQLite)
                vectors.update(self.memories.embeddings(owner, [m for c in chunks[1:] for m in c]))
        return TurnStart(
            state=self.sessions.state_of(owner, session, rows[-3]),
            same_session={str(r[0]) for r in rows[-2]},
            vectors=vectors,
        )

    def finish_turn(self, /, owner: str, *record: Any, **named: Any) -> None:
        """Record what the turn injected (deferred to the commit) and count the injected
        memories' accesses (buffered), in the open write transaction or its own. ``record``:
        the contract's arguments after the owner, as the record :class:`TurnRecord`."""
        session, turn, memory_ids, event = TurnRecord(*record, **named)
        # Only ids, counts and a timing are kept: no text the user typed (issue #33; the
        # event's other keys, such as a query, are never written).
        with self.db.transaction():
            with self.db.write() as q:
                d = self.db.dialect
                # one multi-row upsert per chunk of ids (not one statement per id: ~20 a turn,
                # each parsed and planned on PostgreSQL); ids are distinct, as one PostgreSQL
                # upsert requires of the rows it changes
                ids = list(dict.fromkeys(memory_ids))
                statements: list[tuple[str, Sequence[Any] | None]] = [
                    (
                        "INSERT INTO session_injections (owner, session, memory_id, turn) VALUES "
                        + ", ".join(["(?, ?, ?, ?)"] * len(chunk))
                        + " ON CONFLICT (owner, session, memory_id) DO UPDATE SET "
                        f"turn = {d.greatest}(session_injections.turn, excluded.turn)",
                        [v for mid in chunk for v in (owner, session, mid, turn)],
                    )
                    for chunk in (ids[i : i + CHUNK // 4] for i in range(0, len(ids), CHUNK // 4))
                ]
                statements.append(
                    (
                        "INSERT INTO injection_events (owner, session, turn, memory_ids, skipped, "
                        "elapsed_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            owner,
                            session,
                            turn,
                            json.dumps(list(memory_ids)),
                            json.dumps(dict(event.get("skipped", {}))),
                            float(event.get("elapsed_ms", 0.0)),
                            d.time_in(utcnow()),
                        ),
                    )
                )
                q.defer_all(statements)
            if memory_ids:
                self.db.record_access(owner, memory_ids)
