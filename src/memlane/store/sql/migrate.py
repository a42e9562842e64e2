"""The migration runner, for every backend: named scripts applied in order on open, each in one
transaction together with its row in ``migrations`` (a crash leaves it applied whole or not at
all), then :func:`rehash` when the content hash changed. What a backend supplies: its scripts,
how one is split into statements, the statements that come first (the ``migrations`` table, an
extension), and a transaction that holds its migration lock (SQLite: the write lock; PostgreSQL:
an advisory lock, so that processes opening a new database at once apply each script once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from memlane._ids import utcnow
from memlane._text import HASH_VERSION, content_hash
from memlane.store.sql.dialect import Q

#: ``meta`` key holding the :data:`memlane._text.HASH_VERSION` the stored hashes were made with.
HASH_VERSION_KEY = "content_hash.version"

#: ``(name, script)`` in the order they apply.
Migrations = Sequence[tuple[str, str]]


def pending(q: Q, migrations: Migrations, has_table: Callable[[Q, str], bool]) -> list[str]:
    """Names of the migrations not applied yet (a read: no lock)."""
    done: set[str] = set()
    if has_table(q, "migrations"):
        done = {str(r[0]) for r in q.all("SELECT name FROM migrations")}
    return [name for name, _ in migrations if name not in done]


def migrate(
    q: Q,
    migrations: Migrations,
    *,
    locked: Callable[[], AbstractContextManager[object]],
    has_table: Callable[[Q, str], bool],
    statements: Callable[[str], list[str]],
    setup: Sequence[str],
) -> list[str]:
    """Apply the pending ``migrations`` on ``q`` (outside a transaction); the names applied.
    Each in its own ``locked()`` transaction with its record; an up-to-date store (every open
    but the first) is only read, so a reader opens it while another process writes.

    Raises the driver's errors (the caller translates)."""
    applied: list[str] = []
    if not pending(q, migrations, has_table) and hash_current(q, has_table):
        return applied
    with locked():
        for statement in setup:
            q.run(statement)
    for name, script in migrations:
        with locked():
            if q.one("SELECT 1 FROM migrations WHERE name = ?", (name,)):
                continue  # another process applied it meanwhile
            for statement in statements(script):
                q.run(statement)
            q.run(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                (name, q.dialect.time_in(utcnow())),
            )
            applied.append(name)
    if not hash_current(q, has_table):
        with locked():
            rehash(q)
    return applied


def hash_current(q: Q, has_table: Callable[[Q, str], bool]) -> bool:
    """True when the stored content hashes were made with today's
    :data:`memlane._text.HASH_VERSION` (a read: no lock needed)."""
    if not has_table(q, "meta"):
        return False
    row = q.one("SELECT value FROM meta WHERE key = ?", (HASH_VERSION_KEY,))
    return row is not None and row[0] == str(HASH_VERSION)


def rehash(q: Q, batch: int = 2000) -> int:
    """Recompute every stored content hash (memories and their history) when
    :data:`memlane._text.HASH_VERSION` differs from the one recorded in ``meta``; returns the
    number of rows whose hash changed. Runs inside the caller's transaction: a crash leaves the
    old hashes and the old version, never a mix.

    Two memories of one scope may now share a hash (text that differed only in punctuation or
    case): both are kept — nothing stored is ever dropped — and the oldest is the one later
    repeats confirm (:meth:`~memlane.store.base.MemoryStore.find_by_hash`).
    """
    row = q.one("SELECT value FROM meta WHERE key = ?", (HASH_VERSION_KEY,))
    if row is not None and row[0] == str(HASH_VERSION):
        return 0
    changed = 0
    for table, key in (("memories", "num"), ("memory_history", "id")):
        last = -1
        while True:
            rows = q.all(
                f"SELECT {key}, content, content_hash FROM {table} WHERE {key} > ? "
                f"ORDER BY {key} LIMIT ?",
                (last, batch),
            )
            if not rows:
                break
            last = rows[-1][0]
            updates = [
                (new, num) for num, content, old in rows if (new := content_hash(content)) != old
            ]
            q.many(f"UPDATE {table} SET content_hash = ? WHERE {key} = ?", updates)
            changed += len(updates)
    q.run(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
        "value = excluded.value",
        (HASH_VERSION_KEY, str(HASH_VERSION)),
    )
    return changed
