"""Copying a SQLite store into a PostgreSQL one (``memlane migrate``).

Everything a user stored goes across: memories with their embeddings, history, associations, the
dedup log, sessions (turn counters, injected ids, injection events) and the learn cursors. Ids,
times, counters and metadata are kept as they are (the PostgreSQL rows get their own row numbers
and change numbers).

- **Batches**: each table is read in key order and written ``batch`` rows per transaction; every
  batch commits with the key it reached (``meta`` row ``migrate:<source uuid>:<table>``), so an
  interrupted copy resumes after the last committed batch. Rows are inserted with
  ``ON CONFLICT DO NOTHING``: a batch that was written but whose marker was not is skipped, never
  doubled.
- **Refusals** (nothing written): a target holding another embedding model or dimension
  (:class:`~memlane.errors.EmbeddingMismatch`), and a target that already holds memories that did
  not come from this source (the copy would mix two stores).
- **Indexes built whole**: into an empty ``memories`` table, the HNSW and full-text (GIN)
  indexes are dropped before the first batch and built once after the last (their definitions
  kept in ``meta`` beside the markers, so an interrupted copy still ends with them). Inserting
  into a live HNSW graph costs a graph search per row; pgvector builds the graph from the whole
  table many times faster, in memory when ``maintenance_work_mem`` holds it (``index_memory``).
  Then ``VACUUM (ANALYZE)`` of every table copied: the planner sees the real sizes before the
  first query, and the rows' visibility is settled before they are read.
- **Verification** at the end: per table, the number of rows on both sides; for memories and
  history, a SHA-256 over ``(id, content_hash, content)`` of every row, in id order, on both
  sides. A mismatch is a :class:`~memlane.errors.StoreError` naming the table.
- **Dry run**: reads both sides and reports what would be copied; writes nothing (the target
  database need not even have memlane's tables yet).

The source is opened read-only (``mode=ro``) and never changed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from memlane.errors import EmbeddingMismatch, StoreError
from memlane.store.postgres.errors import describe, translate
from memlane.store.postgres.store import OWNER_LOCK, PostgresStore


@dataclass(frozen=True)
class Table:
    """How one table is copied: its key (read order), its SQLite columns, its PostgreSQL insert."""

    name: str
    key: str
    columns: tuple[str, ...]
    conflict: str
    #: Columns that hold ISO times (SQLite text -> timestamptz); JSON text goes to jsonb as is.
    times: tuple[str, ...] = ()


TABLES: tuple[Table, ...] = (
    Table(
        "memories",
        "num",
        (
            "id",
            "owner",
            "agent",
            "session",
            "source",
            "type",
            "content",
            "content_hash",
            "importance",
            "status",
            "created_at",
            "updated_at",
            "last_accessed_at",
            "access_count",
            "confirmations",
            "metadata",
            "valid_to",
            "embedding",
            "project",
        ),
        "(id)",
        times=("created_at", "updated_at", "last_accessed_at", "valid_to"),
    ),
    Table(
        "memory_history",
        "id",
        ("memory_id", "version", "content", "content_hash", "reason", "replaced_at"),
        "(memory_id, version)",
        times=("replaced_at",),
    ),
    Table(
        "associations",
        "rowid",
        ("source_id", "target_id", "relation", "weight", "created_at"),
        "(source_id, target_id, relation)",
        times=("created_at",),
    ),
    Table(
        "dedup_log",
        "id",
        (
            "id",
            "owner",
            "new_text",
            "existing_id",
            "existing_text",
            "similarity",
            "decision",
            "reasoning",
            "review_status",
            "created_at",
        ),
        "(id)",
        times=("created_at",),
    ),
    Table(
        "sessions",
        "rowid",
        ("owner", "session", "turn", "last_reset_at", "last_reset_reason", "updated_at"),
        "(owner, session)",
        times=("last_reset_at", "updated_at"),
    ),
    Table(
        "session_injections",
        "rowid",
        ("owner", "session", "memory_id", "turn"),
        "(owner, session, memory_id)",
    ),
    Table(
        "injection_events",
        "id",
        (
            "id",
            "owner",
            "session",
            "turn",
            "memory_ids",
            "skipped",
            "elapsed_ms",
            "created_at",
        ),
        "(id)",
        times=("created_at",),
    ),
    Table(
        "learn_cursors",
        "rowid",
        ("owner", "session", "learned", "updated_at"),
        "(owner, session)",
        times=("updated_at",),
    ),
)


@dataclass
class Plan:
    """What a copy found and did: per table, rows in the source, rows copied by this run, and
    (after :func:`verify`) whether both sides agree."""

    source: Path
    target: str
    model: str
    dimension: int
    rows: dict[str, int] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=dict)
    copied: dict[str, int] = field(default_factory=dict)
    verified: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "target": self.target,
            "model": self.model,
            "dimension": self.dimension,
            "tables": {
                t: {
                    "rows": self.rows.get(t, 0),
                    "already": self.done.get(t, 0),
                    "copied": self.copied.get(t, 0),
                }
                for t in self.rows
            },
            "verified": self.verified,
        }


def open_source(path: Path) -> sqlite3.Connection:
    """The SQLite store at ``path``, read-only. Raises :class:`StoreError` when it is missing or
    not a memlane store."""
    if not path.is_file():
        raise StoreError(f"no SQLite store at {path} (give --from sqlite:PATH of a memlane.db)")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("SELECT key, value FROM meta").fetchall()
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"{path} is not a memlane SQLite store ({exc})") from exc
    return conn


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row.fetchone() is not None


def plan(source: Path, target: str) -> Plan:
    """Read both sides; what a copy would do (nothing is written). Raises
    :class:`EmbeddingMismatch` or :class:`StoreError` (the refusals of the module docstring)."""
    src = open_source(source)
    try:
        meta = dict(src.execute("SELECT key, value FROM meta").fetchall())
        out = Plan(
            source, describe(target), meta["embedding.model"], int(meta["embedding.dimension"])
        )
        for table in TABLES:
            if _has_table(src, table.name):
                out.rows[table.name] = int(
                    src.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
                )
        uuid = meta["store.uuid"]
    finally:
        src.close()
    try:
        with psycopg.connect(target, autocommit=True, connect_timeout=10) as conn:
            _check_target(conn, out, uuid)
    except psycopg.Error as exc:
        raise translate(exc, "migrate (read the target)", describe(target)) from exc
    return out


def _check_target(conn: psycopg.Connection[Any], out: Plan, uuid: str) -> None:
    exists = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
    if not (exists and exists[0]):
        return  # a new database: everything to copy
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    model, dim = meta.get("embedding.model"), meta.get("embedding.dimension")
    if model is not None and (model != out.model or int(dim or 0) != out.dimension):
        raise EmbeddingMismatch(
            f"{out.target} holds memories of embedding model {model!r} ({dim} dims), the source "
            f"{out.source} of {out.model!r} ({out.dimension} dims): migrate into an empty "
            "database, or re-embed one side first"
        )
    mine = {k: v for k, v in meta.items() if k.startswith(f"migrate:{uuid}:")}
    count = conn.execute("SELECT count(*) FROM memories").fetchone()
    if count and count[0] and not mine:
        raise StoreError(
            f"{out.target} already holds {count[0]} memories that did not come from "
            f"{out.source}: migrate into an empty database (a copy would mix two stores)"
        )
    for table in out.rows:
        out.done[table] = int(
            json.loads(mine.get(f"migrate:{uuid}:{table}", '{"rows": 0}'))["rows"]
        )


def copy(
    source: Path,
    target: str,
    *,
    batch: int = 1000,
    progress: Callable[[str, int, int], None] | None = None,
    stop_after: int | None = None,
    index_memory: str = "1GB",
) -> Plan:
    """Copy ``source`` (a SQLite store) into the PostgreSQL database ``target`` (created tables
    and all if new), resuming a copy that was interrupted; then :func:`verify`. ``progress``:
    called with ``(table, rows done, rows in all)`` after each batch. ``stop_after``: stop after
    that many batches in all (tests: an interruption). ``index_memory``: PostgreSQL's
    ``maintenance_work_mem`` while the deferred indexes are built (an HNSW graph of N vectors
    of dimension d needs about N * (4 d + 300) bytes to be built in memory: ~2 GB at 1,000,000 of
    384; with less, pgvector goes on building it on disk, slower).

    Raises:
        EmbeddingMismatch: the target holds another embedding model.
        StoreError: a refusal, a failed write (the batch under way is rolled back), or a
            verification that found the two sides different.
    """
    out = plan(source, target)
    store = PostgresStore.open(target, model=out.model, dimension=out.dimension)
    store.close()  # the schema exists now
    src = open_source(source)
    batches = 0
    try:
        uuid = dict(src.execute("SELECT key, value FROM meta").fetchall())["store.uuid"]
        hash_version = dict(src.execute("SELECT key, value FROM meta").fetchall()).get(
            "content_hash.version"
        )
        with psycopg.connect(target, autocommit=True) as conn:
            from memlane.store.postgres.connect import configure

            configure(conn, 40, 60_000)
            # checked before anything is written (a wrong size fails here, not after the copy)
            conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (index_memory,))
            if hash_version is not None and not any(out.done.values()):
                conn.execute(  # the hashes are the source's: PostgreSQL rehashes if older
                    "UPDATE meta SET value = %s WHERE key = 'content_hash.version'",
                    (hash_version,),
                )
            for table in TABLES:
                if table.name not in out.rows:
                    continue
                marker = f"migrate:{uuid}:{table.name}"
                state = conn.execute("SELECT value FROM meta WHERE key = %s", (marker,)).fetchone()
                last, done = (
                    (json.loads(state[0])["last"], json.loads(state[0])["rows"])
                    if state
                    else (None, 0)
                )
                copied = 0
                if table.name == "memories" and state is None:
                    _defer_indexes(conn, uuid)
                for rows, key in _read(src, table, last, batch):
                    if stop_after is not None and batches >= stop_after:
                        return out
                    with conn.transaction():
                        _write(conn, table, rows)
                        done += len(rows)
                        conn.execute(
                            "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                            "DO UPDATE SET value = excluded.value",
                            (marker, json.dumps({"last": key, "rows": done})),
                        )
                    copied += len(rows)
                    batches += 1
                    if progress is not None:
                        progress(table.name, done, out.rows[table.name])
                out.copied[table.name] = copied
                if table.name == "memories":
                    _build_deferred(conn, uuid)
            for name in ("dedup_log", "injection_events"):  # explicit ids were inserted
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                    f"coalesce((SELECT max(id) FROM {name}), 0) + 1, false)"
                )
            # VACUUM too, not only ANALYZE: after a bulk insert the first readers would set
            # every row's hint bits and autovacuum would scan the whole table under the first
            # queries (measured at 1,000,000 memories: inject p95 74 ms while it ran)
            for table in TABLES:
                if table.name in out.rows:
                    conn.execute(f"VACUUM (ANALYZE) {table.name}")
        verify(src, target, out)
    except psycopg.Error as exc:
        raise translate(exc, "migrate", describe(target)) from exc
    finally:
        src.close()
    return out


#: Indexes of ``memories`` built once after a copy into an empty table (module docstring).
DEFERRED_INDEXES = ("memories_embedding_hnsw", "memories_fts")


def _defer_indexes(conn: psycopg.Connection[Any], uuid: str) -> None:
    """Drop the deferred indexes of an empty ``memories`` table, their definitions kept in
    ``meta`` (one transaction: both or neither)."""
    with conn.transaction():
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM memories)").fetchone()
        if row is None or row[0]:
            return  # rows already there: keep the indexes, insert into them
        for name in DEFERRED_INDEXES:
            found = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                "AND indexname = %s",
                (name,),
            ).fetchone()
            if found is None:
                continue
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                "DO UPDATE SET value = excluded.value",
                (f"migrate:{uuid}:index:{name}", found[0]),
            )
            conn.execute(f"DROP INDEX {name}")


def _build_deferred(conn: psycopg.Connection[Any], uuid: str) -> None:
    """Build the indexes :func:`_defer_indexes` dropped (also after an interrupted copy)."""
    pending = conn.execute(
        "SELECT key, value FROM meta WHERE key LIKE %s ORDER BY key",
        (f"migrate:{uuid}:index:%",),
    ).fetchall()
    for key, definition in pending:
        with conn.transaction():
            conn.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
            conn.execute("DELETE FROM meta WHERE key = %s", (key,))


def _read(
    src: sqlite3.Connection, table: Table, last: Any, batch: int
) -> Iterator[tuple[list[dict[str, Any]], Any]]:
    """Batches of ``table``'s rows after key ``last``, in key order, with the last key of each."""
    have = {r[1] for r in src.execute(f"PRAGMA table_info({table.name})")}
    cols = [c if c in have else f"NULL AS {c}" for c in table.columns]
    while True:
        where, args = ("", []) if last is None else (f"WHERE {table.key} > ?", [last])
        rows = src.execute(
            f"SELECT {table.key}, {', '.join(cols)} FROM {table.name} {where} "
            f"ORDER BY {table.key} LIMIT ?",
            [*args, batch],
        ).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        yield [dict(zip(table.columns, r[1:], strict=True)) for r in rows], last


def _write(conn: psycopg.Connection[Any], table: Table, rows: Sequence[dict[str, Any]]) -> None:
    for row in rows:
        for col in table.times:
            if row[col] is not None:
                row[col] = datetime.fromisoformat(row[col])
        if "embedding" in row:
            row["embedding"] = np.frombuffer(row["embedding"], dtype=np.float32)
    cols = list(table.columns)
    values = ", ".join(f"%({c})s" for c in cols)
    if table.name == "memories":
        # one writer per owner at a time (the store's rule), owners in one order: no deadlock
        for owner in sorted({r["owner"] for r in rows}):
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (OWNER_LOCK, owner))
        cols.append("change_seq")
        values += ", nextval('memories_change_seq')"
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({values}) "
            f"ON CONFLICT {table.conflict} DO NOTHING",
            rows,
        )


def _digest(rows: Iterator[Sequence[Any]]) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update("\x1f".join("" if v is None else str(v) for v in row).encode() + b"\x1e")
    return h.hexdigest()


#: What the digests cover: table, columns, order (ids in byte order on both sides).
_DIGESTS = (
    ("memories", "id, content_hash, content", "id", 'id COLLATE "C"'),
    (
        "memory_history",
        "memory_id, version, content_hash, content",
        "memory_id, version",
        'memory_id COLLATE "C", version',
    ),
)


def verify(src: sqlite3.Connection, target: str, out: Plan) -> None:
    """Compare both sides (module docstring); sets ``out.verified``. Raises
    :class:`StoreError` naming the first table that differs."""
    with psycopg.connect(target, autocommit=True) as conn:
        for table in TABLES:
            if table.name not in out.rows:
                continue
            theirs = conn.execute(f"SELECT count(*) FROM {table.name}").fetchone()
            if theirs is None or int(theirs[0]) != out.rows[table.name]:
                raise StoreError(
                    f"verification failed: {table.name} has {out.rows[table.name]} rows in "
                    f"{out.source} but {theirs[0] if theirs else 0} in {out.target}; run the "
                    "migration again to resume it"
                )
        for name, cols, order, pg_order in _DIGESTS:
            ours = _digest(iter(src.execute(f"SELECT {cols} FROM {name} ORDER BY {order}")))
            with conn.cursor() as cur:
                cur.execute(f"SELECT {cols} FROM {name} ORDER BY {pg_order}")
                theirs_digest = _digest(iter(cur))
            if ours != theirs_digest:
                raise StoreError(
                    f"verification failed: the ids, texts or content hashes of {name} differ "
                    f"between {out.source} and {out.target}"
                )
    out.verified = True
