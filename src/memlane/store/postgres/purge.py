"""Real deletion on PostgreSQL (issue #24, docs/security.md): :meth:`PurgeMixin.purge` deletes
memories with every row that holds their text (the same rows as on SQLite).

PostgreSQL keeps a deleted row's old version in its table file until ``VACUUM`` reclaims the
space (and ``VACUUM FULL`` rewrites the table, so no page keeps it); the WAL keeps it until
the segment is recycled, backups and replicas keep their copies. ``memlane purge`` says so; an
operator who must prove erasure runs ``VACUUM FULL memories, memory_history, dedup_log`` (a
table lock while it runs) and checks the backups (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    from memlane.store.index_cache import IndexCache


class PurgeMixin:
    if TYPE_CHECKING:
        _cache: IndexCache

        def transaction(self) -> AbstractContextManager[None]: ...

        def _require_tx(self) -> psycopg.Connection[Any]: ...

        def _lock_owner(self, conn: psycopg.Connection[Any], owner: str) -> None: ...

    def purge(self, owner: str, memory_ids: Sequence[str] | None = None) -> int:
        """Delete ``memory_ids`` of ``owner`` (None: everything of ``owner``) and every row that
        holds their text; returns the memories deleted (ids of other owners count 0)."""
        with self.transaction():
            conn = self._require_tx()
            self._lock_owner(conn, owner)
            if memory_ids is None:
                ids = [
                    r[0] for r in conn.execute("SELECT id FROM memories WHERE owner = %s", (owner,))
                ]
            else:
                ids = [
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM memories WHERE owner = %s AND id = ANY(%s)",
                        (owner, list(memory_ids)),
                    )
                ]
            texts = [
                r[0]
                for r in conn.execute(
                    "SELECT content FROM memories WHERE id = ANY(%(ids)s) UNION ALL "
                    "SELECT content FROM memory_history WHERE memory_id = ANY(%(ids)s)",
                    {"ids": ids},
                )
            ]
            args = {"owner": owner, "ids": ids, "texts": texts}
            conn.execute(
                "DELETE FROM dedup_log WHERE owner = %(owner)s AND (existing_id = ANY(%(ids)s) "
                "OR new_text = ANY(%(texts)s) OR existing_text = ANY(%(texts)s))",
                args,
            )
            conn.execute("DELETE FROM memory_history WHERE memory_id = ANY(%(ids)s)", args)
            conn.execute(
                "DELETE FROM associations WHERE source_id = ANY(%(ids)s) "
                "OR target_id = ANY(%(ids)s)",
                args,
            )
            conn.execute(
                "DELETE FROM session_injections WHERE owner = %(owner)s "
                "AND memory_id = ANY(%(ids)s)",
                args,
            )
            conn.execute(
                "DELETE FROM injection_events WHERE owner = %(owner)s AND EXISTS ("
                "SELECT 1 FROM jsonb_array_elements_text(memory_ids) AS m WHERE m = ANY(%(ids)s))",
                args,
            )
            if memory_ids is None:
                for table in (
                    "dedup_log",
                    "sessions",
                    "session_injections",
                    "injection_events",
                    "learn_cursors",
                ):
                    conn.execute(f"DELETE FROM {table} WHERE owner = %s", (owner,))
            conn.execute("DELETE FROM memories WHERE id = ANY(%(ids)s)", args)
        self._cache.drop(owner)
        return len(ids)
