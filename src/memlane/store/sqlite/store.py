"""SQLite implementation of :class:`~memlane.store.base.MemoryStore`.

One file in WAL mode. Writers take the lock up front (``BEGIN IMMEDIATE``) and wait up to
``busy_timeout_ms`` for another process, so concurrent writers queue instead of failing with
"database is locked". Embeddings live in the ``memories`` table (float32 blobs). Two per-owner
caches of those rows serve the search legs: the ANN index (:mod:`memlane.store.vector_index`) and
the BM25 index (:mod:`memlane.store.text_index`). Both are caught up from ``vec_seq`` before each
read and saved beside the database (``<db>.vec/``) on close so a cold process need not rebuild
them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from memlane._ids import from_iso, new_id, to_iso, utcnow
from memlane.errors import EmbeddingMismatch, NotFound, StoreError
from memlane.store.base import NewDedupLog, NewMemory, ScoredId, Vector, iter_chunks
from memlane.store.sqlite.errors import is_busy, translate
from memlane.store.sqlite.migrations import MIGRATIONS
from memlane.store.text_index import TOKENS_VERSION, TextIndex, tokens
from memlane.store.vector_index import OwnerIndex
from memlane.types import (
    Association,
    ChangeReason,
    Decision,
    DedupLogEntry,
    Memory,
    MemoryType,
    MemoryVersion,
    PinnedSort,
    Relation,
    ResetReason,
    ReviewStatus,
    SessionState,
    Status,
)

_S = TypeVar("_S")
_R = TypeVar("_R")

_MEMORY_COLUMNS = (
    "num, id, owner, agent, session, source, type, content, content_hash, importance, status, "
    "created_at, updated_at, last_accessed_at, access_count, confirmations, metadata"
)
_ACCESS_FLUSH_EVERY = 256
_ACCESS_FLUSH_SECONDS = 5.0
_PERSIST_MIN_VECTORS = 2000
#: Upper ``vec_seq`` bound of a catch-up outside a write transaction (SQLite's largest integer).
_NO_BOUND = 2**63 - 1
#: Query terms beyond this many (long pasted text) are ignored by the full-text leg.
_MAX_QUERY_TERMS = 64


def merge_metadata(existing: Mapping[str, Any], offered: Mapping[str, Any]) -> dict[str, Any]:
    """Merge offered metadata into existing: new keys added; lists unioned (order kept);
    differing scalars become the list of both — nothing the caller offered is dropped."""
    out = dict(existing)
    for key, value in offered.items():
        if value is None:
            continue
        if key not in out or out[key] is None:
            out[key] = value
            continue
        old = out[key]
        if old == value:
            continue
        if isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge_metadata(old, value)
            continue
        merged = list(old) if isinstance(old, list) else [old]
        for item in value if isinstance(value, list) else [value]:
            if item not in merged:
                merged.append(item)
        out[key] = merged
    return out


def _translating(cls: type[_S]) -> type[_S]:
    """Class decorator: every public method of ``cls`` raises memlane errors, never the
    driver's (:func:`memlane.store.sqlite.errors.translate`; the operation is the method's name).
    ``open`` and ``transaction`` translate their own (they also close or roll back)."""
    for name, attr in list(vars(cls).items()):
        if name.startswith("_") or name in {"open", "transaction"} or not inspect.isfunction(attr):
            continue
        setattr(cls, name, _translated(attr))
    return cls


def _translated(method: Callable[..., _R]) -> Callable[..., _R]:
    operation = method.__name__

    @functools.wraps(method)
    def wrapper(self: SQLiteStore, *args: Any, **kwargs: Any) -> _R:
        started = time.monotonic()
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            waited = time.monotonic() - started
            raise translate(exc, operation, self.path, waited_s=waited) from exc

    return wrapper


@_translating
class SQLiteStore:
    """The embedded store. Use :meth:`open`; thread-safe (one connection behind a lock)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        model: str,
        dimension: int,
        busy_timeout_ms: int = 60_000,
    ) -> None:
        self._conn = conn
        self.path = path
        self.model = model
        self.dimension = dimension
        self._lock = threading.RLock()
        self._depth = 0
        #: Highest ``vec_seq`` committed before the open write transaction (``None``: not read yet).
        self._tx_base_seq: int | None = None
        self._tx_next_seq = 0
        self._pending: dict[str, dict[int, tuple[str | None, Vector]]] = {}
        self._indexes: dict[str, OwnerIndex] = {}
        self._text_indexes: dict[str, TextIndex] = {}
        #: Buffered access counts: (owner, id) -> (count, last access time).
        self._access: dict[tuple[str, str], tuple[int, str]] = {}
        self._access_since = time.monotonic()
        self._store_uuid = ""
        self._closed = False
        self._busy_ms = int(busy_timeout_ms)

    # ------------------------------------------------------------------ open / close
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        model: str,
        dimension: int,
        busy_timeout_ms: int = 60_000,
    ) -> SQLiteStore:
        """Open (creating if needed) the store at ``path`` and apply pending migrations.

        Raises:
            EmbeddingMismatch: the store was built with another model or dimension.
            StoreError: the file is not a memlane database or cannot be opened.
        """
        p = Path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(p),
                isolation_level=None,
                check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise translate(exc, "open", p) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            mode = _enable_wal(conn, p, busy_timeout_ms)
            if mode != "wal":
                raise StoreError(
                    f"{p}: could not switch to WAL mode (got {mode})", operation="open", path=p
                )
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            store = cls(conn, p, model, dimension, busy_timeout_ms)
            store._migrate()
            store._check_model()
        except sqlite3.Error as exc:
            conn.close()
            raise translate(exc, "open", p) from exc
        except BaseException:
            conn.close()
            raise
        return store

    def _migrate(self) -> None:
        # Read first: an up-to-date store (every open but the first) needs no write lock, so a
        # reader opens it while another process holds that lock.
        if not self._pending_migrations():
            return
        with self.transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {r[0] for r in self._conn.execute("SELECT name FROM migrations")}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                for statement in _split_sql(sql):
                    self._conn.execute(statement)
                self._conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                    (name, to_iso(utcnow())),
                )

    def _pending_migrations(self) -> list[str]:
        known = self._conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
        ).fetchone()[0]
        done = {r[0] for r in self._conn.execute("SELECT name FROM migrations")} if known else set()
        return [name for name, _ in MIGRATIONS if name not in done]

    def _check_model(self) -> None:
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if "embedding.model" not in meta:  # a new store: record its model (read again, locked)
            with self.transaction():
                meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
                if "embedding.model" not in meta:
                    self._conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [
                            ("embedding.model", self.model),
                            ("embedding.dimension", str(self.dimension)),
                            ("store.uuid", new_id()),
                        ],
                    )
                    meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if (
            meta["embedding.model"] != self.model
            or int(meta["embedding.dimension"]) != self.dimension
        ):
            raise EmbeddingMismatch(
                f"{self.path} was built with embedding model {meta['embedding.model']!r} "
                f"({meta['embedding.dimension']} dims) but is being opened with {self.model!r} "
                f"({self.dimension} dims). Open it with the same [embedding] settings, or start "
                f"a new store (another --home) and re-import."
            )
        self._store_uuid = meta["store.uuid"]

    def close(self) -> None:
        """Flush buffered access counts, save large vector indexes, close the connection."""
        with self._lock:
            if self._closed:
                return
            try:
                self._flush_access(force=True)
                self._save_indexes()
            finally:
                self._closed = True
                self._conn.close()
                self._conn = cast(sqlite3.Connection, _ClosedConnection(self.path))

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._begin_immediate()
            self._depth = 1
            step = "write"
            try:
                yield
                step = "commit"
                self._flush_access(force=True)
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:  # from the store's own statements (public ones translate)
                self._rollback()
                raise translate(exc, step, self.path) from exc
            except BaseException:
                self._rollback()
                raise
            finally:
                self._depth = 0
                self._tx_base_seq = None
                self._pending.clear()

    def _rollback(self) -> None:
        """Roll back the open transaction unless SQLite already did (it does by itself on a full
        disk or an I/O error: a second ROLLBACK would fail with "no transaction is active"). A
        failing rollback never hides the error that caused it."""
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def _begin_immediate(self) -> None:
        """Take the write lock, waiting at most ``busy_timeout_ms`` in all (one deadline).

        SQLite's busy handler does the waiting; the loop covers the rare SQLITE_BUSY returned
        without calling it (e.g. while a WAL checkpoint restarts), each attempt allowed only the
        time left. Raises :class:`StoreBusy` at the deadline.
        """
        started = time.monotonic()
        deadline = started + self._busy_ms / 1000
        delay = 0.01
        shortened = False
        try:
            while True:
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.Error as exc:
                    now = time.monotonic()
                    if not is_busy(exc) or now + 0.001 >= deadline:
                        raise translate(
                            exc, "begin a write", self.path, waited_s=now - started
                        ) from exc
                    time.sleep(min(delay, deadline - now))
                    delay = min(delay * 2, 0.25)
                    left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                    self._conn.execute(f"PRAGMA busy_timeout = {left_ms}")
                    shortened = True
        finally:
            if shortened:
                self._conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")

    def _require_tx(self) -> None:
        if not self._depth:
            raise StoreError("internal: write outside a transaction")

    def _tx_base(self) -> int:
        """The highest ``vec_seq`` committed before the open write transaction. Read on first use
        (most transactions never need it): while the transaction holds the write lock no other
        process commits, and this one changes ``vec_seq`` only through :meth:`_next_seq`."""
        if self._tx_base_seq is None:
            row = self._conn.execute("SELECT max(vec_seq) FROM memories").fetchone()
            self._tx_base_seq = self._tx_next_seq = int(row[0] or 0)
        return self._tx_base_seq

    def _next_seq(self) -> int:
        self._tx_base()
        self._tx_next_seq += 1
        return self._tx_next_seq

    # ------------------------------------------------------------------ rows
    def _row_to_memory(self, row: Sequence[Any]) -> Memory:
        return Memory(
            id=row[1],
            owner=row[2],
            agent=row[3],
            session=row[4],
            source=row[5],
            type=MemoryType(row[6]),
            content=row[7],
            content_hash=row[8],
            importance=float(row[9]),
            status=Status(row[10]),
            created_at=from_iso(row[11]),  # type: ignore[arg-type]
            updated_at=from_iso(row[12]),  # type: ignore[arg-type]
            last_accessed_at=from_iso(row[13]),
            access_count=int(row[14]),
            confirmations=int(row[15]),
            metadata=json.loads(row[16]),
        )

    def _fetch_one(self, where: str, args: Sequence[Any]) -> tuple[int, Memory] | None:
        row = self._conn.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE {where}", args
        ).fetchone()
        return None if row is None else (int(row[0]), self._row_to_memory(row))

    def _require(self, owner: str, memory_id: str) -> tuple[int, Memory]:
        """The row of ``owner``'s memory ``memory_id``; :class:`NotFound` (the same message as
        for a missing id) when it does not exist or is another owner's."""
        found = self._fetch_one("id = ? AND owner = ?", (memory_id, owner))
        if found is None:
            raise NotFound(f"no memory with id {memory_id!r} for owner {owner!r}")
        return found

    # ------------------------------------------------------------------ memories
    def insert(self, memory: NewMemory, embedding: Vector) -> Memory:
        with self._lock:
            self._require_tx()
            seq = self._next_seq()
            now = to_iso(memory.created_at)
            blob = np.asarray(embedding, dtype=np.float32).tobytes()
            cur = self._conn.execute(
                "INSERT INTO memories (id, owner, agent, session, source, type, content, content_hash, "
                "importance, status, created_at, updated_at, metadata, embedding, vec_seq) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)",
                (
                    memory.id,
                    memory.owner,
                    memory.agent,
                    memory.session,
                    memory.source,
                    memory.type.value,
                    memory.content,
                    memory.content_hash,
                    memory.importance,
                    now,
                    now,
                    json.dumps(dict(memory.metadata), ensure_ascii=False),
                    blob,
                    seq,
                ),
            )
            num = int(cur.lastrowid or 0)
            self._pending.setdefault(memory.owner, {})[num] = (memory.agent, embedding)
            return self._require(memory.owner, memory.id)[1]

    def get(self, owner: str, memory_id: str, *, agent: str | None = None) -> Memory | None:
        where, args = "id = ? AND owner = ?", [memory_id, owner]
        if agent is not None:
            where += " AND (agent = ? OR agent IS NULL)"
            args.append(agent)
        with self._lock:
            found = self._fetch_one(where, args)
            return None if found is None else found[1]

    def _get_many(
        self, owner: str, column: str, keys: Sequence[Any]
    ) -> dict[Any, tuple[int, Memory]]:
        out: dict[Any, tuple[int, Memory]] = {}
        for chunk in iter_chunks(keys):
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE owner = ? AND {column} IN ({marks})",
                [owner, *chunk],
            ):
                mem = self._row_to_memory(row)
                out[row[0] if column == "num" else mem.id] = (int(row[0]), mem)
        return out

    def get_many(self, owner: str, ids: Sequence[str]) -> dict[str, Memory]:
        with self._lock:
            found = self._get_many(owner, "id", list(dict.fromkeys(ids)))
            return {k: v[1] for k, v in found.items()}

    def find_by_hash(self, owner: str, agent: str | None, content_hash: str) -> Memory | None:
        with self._lock:
            # INDEXED BY: without it SQLite walks the (owner, status, created_at) index for the
            # ORDER BY, a scan of every memory of the owner (tens of ms at 100k).
            row = self._conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories INDEXED BY memories_scope_hash "
                "WHERE owner = ? AND agent IS ? AND content_hash = ? AND status = 'active' "
                "ORDER BY created_at LIMIT 1",
                (owner, agent, content_hash),
            ).fetchone()
            return None if row is None else self._row_to_memory(row)

    def nearest(
        self, owner: str, agent: str | None, vector: Vector, k: int
    ) -> list[tuple[Memory, float]]:
        with self._lock:
            index = self._index(owner)
            pending = [
                (key, p_vec)
                for key, (p_agent, p_vec) in self._pending.get(owner, {}).items()
                if p_agent == agent
            ]
            pending_scores: dict[int, float] = {}
            if pending:  # rows written in this transaction: not in the index yet
                sims = np.stack([v for _, v in pending]) @ np.asarray(vector, dtype=np.float32)
                for (key, _), sim in zip(pending, sims.tolist(), strict=True):
                    pending_scores[key] = float(sim)
            # The index holds every agent's memories of the owner: when other scopes exist, ask
            # for more and, if other agents' near-copies still crowd out this scope, ask again.
            over = k * 4 if agent is not None or self._has_agent_scopes(owner) else k
            while True:
                found = index.search(vector, over)
                scores = dict(found)
                scores.update(pending_scores)
                out = self._scoped(owner, scores, k, agent)
                if len(out) >= k or len(found) < over:
                    return out
                over *= 4

    def _scoped(
        self, owner: str, scores: dict[int, float], k: int, agent: str | None
    ) -> list[tuple[Memory, float]]:
        """The best ``k`` active memories of exactly ``agent`` among ``scores`` (row number ->
        cosine), best first (ties by row number). Rows are read in chunks, best first, only
        until ``k`` qualify."""
        ranked = sorted(scores, key=lambda num: (-scores[num], num))
        out: list[tuple[Memory, float]] = []
        for start in range(0, len(ranked), k):
            chunk = ranked[start : start + k]
            rows = self._get_many(owner, "num", chunk)
            for num in chunk:
                mem = rows[num][1] if num in rows else None
                if mem is not None and mem.status is Status.ACTIVE and mem.agent == agent:
                    out.append((mem, scores[num]))
            if len(out) >= k:
                break
        return out[:k]

    def _has_agent_scopes(self, owner: str) -> bool:
        """True when some of the owner's memories belong to an agent (lookups must over-fetch)."""
        row = self._conn.execute(
            "SELECT 1 FROM memories WHERE owner = ? AND agent IS NOT NULL LIMIT 1", (owner,)
        ).fetchone()
        return row is not None

    def replace_content(
        self,
        owner: str,
        memory_id: str,
        content: str,
        content_hash: str,
        embedding: Vector,
        reason: ChangeReason,
    ) -> Memory:
        with self._lock:
            self._require_tx()
            num, old = self._require(owner, memory_id)
            self._add_history(old, ChangeReason(reason))
            self._conn.execute(
                "UPDATE memories SET content = ?, content_hash = ?, embedding = ?, updated_at = ?, "
                "vec_seq = ? WHERE num = ?",
                (
                    content,
                    content_hash,
                    np.asarray(embedding, dtype=np.float32).tobytes(),
                    to_iso(utcnow()),
                    self._next_seq(),
                    num,
                ),
            )
            self._pending.setdefault(old.owner, {})[num] = (old.agent, embedding)
            return self._require(owner, memory_id)[1]

    def _add_history(self, old: Memory, reason: ChangeReason) -> None:
        version = self._conn.execute(
            "SELECT count(*) FROM memory_history WHERE memory_id = ?", (old.id,)
        ).fetchone()[0]
        self._conn.execute(
            "INSERT INTO memory_history (memory_id, version, content, content_hash, reason, replaced_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                old.id,
                int(version) + 1,
                old.content,
                old.content_hash,
                reason.value,
                to_iso(utcnow()),
            ),
        )

    def confirm(self, owner: str, memory_id: str, provenance: Mapping[str, Any]) -> Memory:
        with self._lock:
            self._require_tx()
            num, old = self._require(owner, memory_id)
            metadata = merge_metadata(old.metadata, provenance)
            self._conn.execute(
                "UPDATE memories SET confirmations = confirmations + 1, metadata = ?, updated_at = ? "
                "WHERE num = ?",
                (json.dumps(metadata, ensure_ascii=False), to_iso(utcnow()), num),
            )
            return self._require(owner, memory_id)[1]

    def set_status(self, owner: str, memory_id: str, status: Status) -> Memory:
        with self._lock:
            self._require_tx()
            num, _ = self._require(owner, memory_id)
            self._conn.execute(
                "UPDATE memories SET status = ?, updated_at = ?, vec_seq = ? WHERE num = ?",
                (Status(status).value, to_iso(utcnow()), self._next_seq(), num),
            )
            return self._require(owner, memory_id)[1]

    def list_memories(
        self,
        owner: str,
        *,
        agent: str | None = None,
        type: MemoryType | None = None,
        limit: int = 100,
    ) -> list[Memory]:
        where = ["owner = ?", "status = 'active'"]
        args: list[Any] = [owner]
        if agent is not None:
            where.append("(agent = ? OR agent IS NULL)")
            args.append(agent)
        if type is not None:
            where.append("type = ?")
            args.append(MemoryType(type).value)
        args.append(int(limit))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, num DESC LIMIT ?",
                args,
            ).fetchall()
            return [self._row_to_memory(r) for r in rows]

    def history(self, owner: str, memory_id: str) -> list[MemoryVersion]:
        with self._lock:
            self._require(owner, memory_id)
            return [
                MemoryVersion(
                    memory_id=r[0],
                    version=int(r[1]),
                    content=r[2],
                    content_hash=r[3],
                    reason=ChangeReason(r[4]),
                    replaced_at=from_iso(r[5]),  # type: ignore[arg-type]
                )
                for r in self._conn.execute(
                    "SELECT memory_id, version, content, content_hash, reason, replaced_at "
                    "FROM memory_history WHERE memory_id = ? ORDER BY version",
                    (memory_id,),
                )
            ]

    def add_association(
        self, owner: str, source_id: str, target_id: str, relation: Relation, weight: float
    ) -> None:
        with self._lock:
            self._require_tx()
            self._require(owner, source_id)
            self._require(owner, target_id)
            self._conn.execute(
                "INSERT INTO associations (source_id, target_id, relation, weight, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (source_id, target_id, relation) "
                "DO UPDATE SET weight = max(weight, excluded.weight)",
                (source_id, target_id, Relation(relation).value, float(weight), to_iso(utcnow())),
            )

    def _associations(self, owner: str, where: str, args: Sequence[Any]) -> list[Association]:
        """Links matching ``where`` whose both ends are ``owner``'s memories."""
        return [
            Association(
                source_id=r[0],
                target_id=r[1],
                relation=Relation(r[2]),
                weight=float(r[3]),
                created_at=from_iso(r[4]),  # type: ignore[arg-type]
            )
            for r in self._conn.execute(
                "SELECT a.source_id, a.target_id, a.relation, a.weight, a.created_at "
                "FROM associations a JOIN memories s ON s.id = a.source_id "
                "JOIN memories t ON t.id = a.target_id "
                f"WHERE s.owner = ? AND t.owner = ? AND ({where})",
                [owner, owner, *args],
            )
        ]

    def associations(self, owner: str, memory_id: str) -> list[Association]:
        with self._lock:
            self._require(owner, memory_id)
            return self._associations(
                owner, "a.source_id = ? OR a.target_id = ?", (memory_id, memory_id)
            )

    def neighbours(self, owner: str, ids: Sequence[str]) -> list[Association]:
        out: list[Association] = []
        with self._lock:
            for chunk in iter_chunks(list(dict.fromkeys(ids))):
                marks = ",".join("?" * len(chunk))
                out.extend(
                    self._associations(
                        owner,
                        f"a.source_id IN ({marks}) OR a.target_id IN ({marks})",
                        [*chunk, *chunk],
                    )
                )
        return list(dict.fromkeys(out))  # a link between two chunks is found twice

    def log_dedup(self, entry: NewDedupLog) -> None:
        with self._lock:
            self._require_tx()
            self._conn.execute(
                "INSERT INTO dedup_log (owner, new_text, existing_id, existing_text, similarity, "
                "decision, reasoning, review_status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.owner,
                    entry.new_text,
                    entry.existing_id,
                    entry.existing_text,
                    entry.similarity,
                    Decision(entry.decision).value,
                    entry.reasoning,
                    ReviewStatus(entry.review_status).value,
                    to_iso(utcnow()),
                ),
            )

    def dedup_log(
        self, owner: str, *, decision: Decision | None = None, limit: int = 100
    ) -> list[DedupLogEntry]:
        where, args = ["owner = ?"], [owner]
        if decision is not None:
            where.append("decision = ?")
            args.append(Decision(decision).value)
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, owner, new_text, existing_id, existing_text, similarity, decision, "
                f"reasoning, review_status, created_at FROM dedup_log WHERE {' AND '.join(where)} "
                "ORDER BY id DESC LIMIT ?",
                [*args, int(limit)],
            ).fetchall()
        return [
            DedupLogEntry(
                id=int(r[0]),
                owner=r[1],
                new_text=r[2],
                existing_id=r[3],
                existing_text=r[4],
                similarity=r[5],
                decision=Decision(r[6]),
                reasoning=r[7],
                review_status=ReviewStatus(r[8]),
                created_at=from_iso(r[9]),  # type: ignore[arg-type]
            )
            for r in rows
        ]

    def count(self, owner: str | None = None) -> int:
        with self._lock:
            if owner is None:
                row = self._conn.execute("SELECT count(*) FROM memories WHERE status = 'active'")
            else:
                row = self._conn.execute(
                    "SELECT count(*) FROM memories WHERE owner = ? AND status = 'active'", (owner,)
                )
            return int(row.fetchone()[0])

    # ------------------------------------------------------------------ in-memory indexes
    def _changes(self, owner: str, watermark: int, columns: str) -> tuple[list[Any], int]:
        """Rows of ``owner`` changed since ``watermark`` (``num, active, <columns>``, in
        ``vec_seq`` order) and the new watermark: one read, usually of no row. Writers number
        their changes on from the highest committed ``vec_seq`` while they hold the write lock,
        so committed rows never leave a gap below the last one read.

        Inside a write transaction, only rows committed before it began (never its own, which a
        rollback could take back), and the watermark moves up to that point: no committed row
        can lie between, so later catch-ups in the same transaction read nothing at all."""
        upto = self._tx_base() if self._depth else _NO_BOUND
        if upto <= watermark:
            return [], watermark
        rows = self._conn.execute(
            f"SELECT num, status = 'active', {columns}, vec_seq FROM memories "
            "WHERE owner = ? AND vec_seq > ? AND vec_seq <= ? ORDER BY vec_seq",
            (owner, watermark, upto),
        ).fetchall()
        if self._depth:
            watermark = upto
        elif rows:
            watermark = int(rows[-1][-1])
        return [r[:-1] for r in rows], watermark

    def _index(self, owner: str) -> OwnerIndex:
        """The owner's vector index, caught up with every committed change."""
        index = self._indexes.get(owner)
        if index is None:
            index = self._indexes[owner] = self._load_index(owner) or OwnerIndex(self.dimension)
        index.apply(*self._changes(owner, index.watermark, "embedding"))
        return index

    def _text_index(self, owner: str) -> TextIndex:
        """The owner's BM25 index, caught up with every committed change."""
        index = self._text_indexes.get(owner)
        if index is None:
            index = self._text_indexes[owner] = self._load_text_index(owner) or TextIndex()
        index.apply(*self._changes(owner, index.watermark, "content, agent, type"))
        return index

    def _index_file(self, owner: str, suffix: str = ".usearch") -> Path:
        digest = hashlib.sha256(owner.encode("utf-8")).hexdigest()[:24]
        return self.path.with_name(self.path.name + ".vec") / f"{digest}{suffix}"

    def _load_index(self, owner: str) -> OwnerIndex | None:
        file = self._index_file(owner)
        meta_file = file.with_suffix(".json")
        if not (file.is_file() and meta_file.is_file()):
            return None
        try:
            meta = json.loads(meta_file.read_text())
            if meta.get("store") != self._store_uuid or meta.get("dimension") != self.dimension:
                return None
            index = OwnerIndex(self.dimension)
            index._index.load(str(file))
            index.watermark = int(meta["watermark"])
            if len(index) != int(meta["count"]):
                return None
            index.saved_at = index.watermark  # on disk as it is: no need to write it on close
            return index
        except (OSError, ValueError, KeyError, RuntimeError):
            return None  # a cache: rebuild from the database

    def _load_text_index(self, owner: str) -> TextIndex | None:
        file = self._index_file(owner, ".bm25.npz")
        if not file.is_file():
            return None
        try:
            with np.load(file, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                if meta.get("store") != self._store_uuid or meta.get("tokens") != TOKENS_VERSION:
                    return None
                index = TextIndex.from_arrays(data)
            index.watermark = int(meta["watermark"])
            index.saved_at = index.watermark
            return index
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a cache: rebuild from the database

    def _save_indexes(self) -> None:
        for owner, index in self._indexes.items():
            if len(index) >= _PERSIST_MIN_VECTORS and index.saved_at != index.watermark:
                self._save_vector_index(owner, index)
        for owner, text in self._text_indexes.items():
            if len(text) >= _PERSIST_MIN_VECTORS and text.saved_at != text.watermark:
                self._save_text_index(owner, text)

    def _save_vector_index(self, owner: str, index: OwnerIndex) -> None:
        file = self._index_file(owner)
        meta = {
            "store": self._store_uuid,
            "owner": owner,
            "dimension": self.dimension,
            "watermark": index.watermark,
            "count": len(index),
        }
        if _write_atomic(file, lambda tmp: index._index.save(str(tmp))) and _write_atomic(
            file.with_suffix(".json"), lambda tmp: tmp.write_text(json.dumps(meta))
        ):
            index.saved_at = index.watermark

    def _save_text_index(self, owner: str, index: TextIndex) -> None:
        meta = {
            "store": self._store_uuid,
            "owner": owner,
            "watermark": index.watermark,
            "tokens": TOKENS_VERSION,
        }
        arrays: dict[str, Any] = {**index.to_arrays(), "meta": np.array(json.dumps(meta))}

        def write(tmp: Path) -> None:
            with tmp.open("wb") as fh:
                np.savez(fh, **arrays)

        if _write_atomic(self._index_file(owner, ".bm25.npz"), write):
            index.saved_at = index.watermark

    def vector_search(
        self,
        owner: str,
        agent: str | None,
        vector: Vector,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        wanted = None if not types else {MemoryType(t).value for t in types}
        with self._lock:
            index = self._index(owner)
            over = k * 3 if agent is not None or wanted else k
            while True:
                found = index.search(vector, over)
                by_num = {
                    int(r[0]): r
                    for r in self._rows_by_num(
                        owner, "id, agent, type", [key for key, _ in found], active=True
                    )
                }
                out: list[ScoredId] = []
                for key, cos in found:
                    r = by_num.get(key)
                    if r is None or (agent is not None and r[2] not in (None, agent)):
                        continue
                    if wanted is None or r[3] in wanted:
                        out.append(ScoredId(r[1], cos))
                # other agents' or types' memories crowded the first `over` out: ask again
                if len(out) >= k or len(found) < over:
                    return out[:k]
                over *= 4

    def fts_search(
        self,
        owner: str,
        agent: str | None,
        query: str,
        k: int,
        types: Collection[MemoryType] | None = None,
    ) -> list[ScoredId]:
        terms = tokens(query)[:_MAX_QUERY_TERMS]
        if not terms or k <= 0:
            return []
        wanted = None if not types else [MemoryType(t).value for t in types]
        with self._lock:
            hits = self._text_index(owner).search(terms, k, agent, wanted)
            if not hits:
                return []
            rows = self._rows_by_num(owner, "id", [key for key, _ in hits])
        ids = {int(r[0]): str(r[1]) for r in rows}
        return [ScoredId(ids[key], score) for key, score in hits if key in ids]

    def _rows_by_num(
        self, owner: str, columns: str, nums: Sequence[int], *, active: bool = False
    ) -> list[Any]:
        """``(num, <columns>)`` of ``owner``'s rows among ``nums`` (chunked ``IN`` lists)."""
        status = " AND status = 'active'" if active else ""
        rows: list[Any] = []
        for chunk in iter_chunks(nums):
            rows.extend(
                self._conn.execute(
                    f"SELECT num, {columns} FROM memories WHERE owner = ?{status} AND num IN "
                    f"({','.join('?' * len(chunk))})",
                    [owner, *chunk],
                ).fetchall()
            )
        return rows

    def embeddings(self, owner: str, ids: Sequence[str]) -> dict[str, Vector]:
        # Straight from the rows: current (another process may have re-embedded one), inactive
        # ones and this transaction's included, and faster than the ANN index's copies.
        out: dict[str, Vector] = {}
        with self._lock:
            for chunk in iter_chunks(ids):
                marks = ",".join("?" * len(chunk))
                for mid, blob in self._conn.execute(
                    f"SELECT id, embedding FROM memories WHERE owner = ? AND id IN ({marks})",
                    [owner, *chunk],
                ):
                    out[mid] = np.frombuffer(blob, dtype=np.float32)
        return out

    def cosines(self, owner: str, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        return {mid: float(vec @ vector) for mid, vec in self.embeddings(owner, ids).items()}

    def record_access(self, owner: str, ids: Sequence[str]) -> None:
        now = to_iso(utcnow())
        with self._lock:
            for mid in ids:
                count, _ = self._access.get((owner, mid), (0, now))
                self._access[(owner, mid)] = (count + 1, now)
            self._flush_access()

    def _flush_access(self, *, force: bool = False) -> None:
        if not self._access:
            self._access_since = time.monotonic()
            return
        due = len(self._access) >= _ACCESS_FLUSH_EVERY or (
            time.monotonic() - self._access_since >= _ACCESS_FLUSH_SECONDS
        )
        if not (force or due):
            return
        rows = [(c, ts, mid, owner) for (owner, mid), (c, ts) in self._access.items()]
        sql = (
            "UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? "
            "WHERE id = ? AND owner = ?"
        )
        if self._depth:
            self._conn.executemany(sql, rows)
        else:
            # Opportunistic: never make a search wait for another process's write lock (but a
            # forced flush, on close, waits like any writer, within busy_timeout_ms).
            try:
                if force:
                    self._begin_immediate()
                else:
                    self._conn.execute("PRAGMA busy_timeout = 20")
                    try:
                        self._conn.execute("BEGIN IMMEDIATE")
                    finally:
                        self._conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                try:
                    self._conn.executemany(sql, rows)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
            except sqlite3.Error:
                if not force:
                    return  # busy, or read-only: keep the buffer for the next flush
                raise
        self._access.clear()
        self._access_since = time.monotonic()

    def pinned(
        self,
        owner: str,
        agent: str | None,
        types: Sequence[MemoryType],
        limit: int,
        sort: PinnedSort,
    ) -> list[Memory]:
        if not types or limit <= 0:
            return []
        order = (
            "importance DESC, created_at DESC"
            if PinnedSort(sort) is PinnedSort.IMPORTANCE
            else "created_at DESC"
        )
        args: list[Any] = [owner, *(MemoryType(t).value for t in types)]
        agent_sql = ""
        if agent is not None:
            agent_sql = " AND (agent = ? OR agent IS NULL)"
            args.append(agent)
        args.append(int(limit))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE owner = ? AND status = 'active' "
                f"AND type IN ({','.join('?' * len(types))}){agent_sql} ORDER BY {order} LIMIT ?",
                args,
            ).fetchall()
            return [self._row_to_memory(r) for r in rows]

    # ------------------------------------------------------------------ sessions
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


class _ClosedConnection:
    """Stands in for the connection after close: any use raises StoreError, not sqlite3's own."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __getattr__(self, name: str) -> Any:
        raise StoreError(f"the store {self._path} is closed (open the engine again)")


def _enable_wal(conn: sqlite3.Connection, path: Path, busy_timeout_ms: int) -> str:
    """Switch to WAL mode. Two processes creating a new file at once can get "database is
    locked" here without SQLite's busy handler being called (the switch needs an exclusive lock),
    so retry until the busy timeout, one deadline for all attempts; the mode is persistent, so
    the second one finds it set. Raises :class:`StoreBusy` at the deadline."""
    started = time.monotonic()
    deadline = started + busy_timeout_ms / 1000
    delay = 0.005
    try:
        while True:
            try:
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.Error as exc:
                now = time.monotonic()
                if not is_busy(exc) or now + 0.001 >= deadline:
                    raise translate(exc, "open", path, waited_s=now - started) from exc
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 0.2)
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                conn.execute(f"PRAGMA busy_timeout = {left_ms}")
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")


def _write_atomic(file: Path, write: Callable[[Path], object]) -> bool:
    """Write ``file`` through a temporary file and a rename; ``False`` if that failed (the
    in-memory indexes are caches: the next process rebuilds what could not be saved)."""
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, file)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (``sqlite3.complete_statement`` knows triggers)."""
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements
