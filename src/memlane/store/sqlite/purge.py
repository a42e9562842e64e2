"""Real deletion on SQLite (issue #24, docs/security.md): :meth:`PurgeMixin.purge` deletes
memories with every row that holds their text, then makes the file forget it.

``forget`` keeps a memory on disk with its history; ``purge`` removes it: the memory, its
history, the dedup log rows that quote it, its associations, the session records that name it;
for a whole owner, every row of the owner. With ``PRAGMA secure_delete`` on, SQLite overwrites
the freed content with zeros; the FTS5 index is rebuilt (``optimize``: no old segment keeps a
token); a WAL checkpoint (``TRUNCATE``) then writes the pages into the database and empties the
WAL, whose frames held copies; the owner's saved search indexes (``<db>.vec/``) are deleted and
rebuilt from the rows on next use.

Not covered: copies outside this file (backups, another process's memory until it restarts,
the OS's freed disk blocks); a checkpoint blocked by a reader of another process is retried at
that process's next write.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlane.store.index_cache import IndexCache


class PurgeMixin:
    if TYPE_CHECKING:
        _conn: sqlite3.Connection
        _lock: threading.RLock
        _cache: IndexCache
        path: Path

        def transaction(self) -> AbstractContextManager[None]: ...

    def purge(self, owner: str, memory_ids: Sequence[str] | None = None) -> int:
        """Delete ``memory_ids`` of ``owner`` (None: everything of ``owner``) and every row that
        holds their text; returns the memories deleted (ids of other owners count 0)."""
        with self._lock:
            self._conn.execute("PRAGMA secure_delete = ON")
            with self.transaction():
                if memory_ids is None:
                    deleted = self._purge_owner(owner)
                else:
                    deleted = self._purge_ids(owner, list(memory_ids))
                self._conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
            self._cache.drop(owner)
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return deleted

    def _purge_ids(self, owner: str, ids: list[str]) -> int:
        c = self._conn
        ids = [
            r[0]
            for mid in ids
            for r in c.execute("SELECT id FROM memories WHERE id = ? AND owner = ?", (mid, owner))
        ]
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        texts = [
            r[0] for r in c.execute(f"SELECT content FROM memories WHERE id IN ({marks})", ids)
        ]
        texts += [
            r[0]
            for r in c.execute(
                f"SELECT content FROM memory_history WHERE memory_id IN ({marks})", ids
            )
        ]
        tmarks = ",".join("?" * len(texts))
        c.execute(
            f"DELETE FROM dedup_log WHERE owner = ? AND (existing_id IN ({marks}) "
            f"OR new_text IN ({tmarks}) OR existing_text IN ({tmarks}))",
            [owner, *ids, *texts, *texts],
        )
        c.execute(f"DELETE FROM memory_history WHERE memory_id IN ({marks})", ids)
        c.execute(
            f"DELETE FROM associations WHERE source_id IN ({marks}) OR target_id IN ({marks})",
            [*ids, *ids],
        )
        c.execute(
            f"DELETE FROM session_injections WHERE owner = ? AND memory_id IN ({marks})",
            [owner, *ids],
        )
        gone = set(ids)
        events = c.execute(
            "SELECT id, memory_ids FROM injection_events WHERE owner = ?", (owner,)
        ).fetchall()
        stale = [(n,) for n, shown in events if gone & set(json.loads(shown))]
        c.executemany("DELETE FROM injection_events WHERE id = ?", stale)
        c.execute(f"DELETE FROM memories WHERE id IN ({marks})", ids)
        return len(ids)

    def _purge_owner(self, owner: str) -> int:
        c = self._conn
        ids = [r[0] for r in c.execute("SELECT id FROM memories WHERE owner = ?", (owner,))]
        c.execute(
            "DELETE FROM memory_history WHERE memory_id IN "
            "(SELECT id FROM memories WHERE owner = ?)",
            (owner,),
        )
        c.execute(
            "DELETE FROM associations WHERE source_id IN (SELECT id FROM memories WHERE owner = ?)"
            " OR target_id IN (SELECT id FROM memories WHERE owner = ?)",
            (owner, owner),
        )
        for table in (
            "dedup_log",
            "sessions",
            "session_injections",
            "injection_events",
            "learn_cursors",
            "memories",
        ):
            c.execute(f"DELETE FROM {table} WHERE owner = ?", (owner,))
        return len(ids)
