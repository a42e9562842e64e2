"""What differs between the SQL of two backends, and the query handle the parts write through.

The parts of :mod:`memlane.store.sql` write their SQL once, with ``?`` placeholders (SQLite's
qmark style), and read and write values through the dialect:

=====================  ==============================  =====================================
what                   SQLite                          PostgreSQL
=====================  ==============================  =====================================
placeholders           ``?``                           ``%s`` (``%`` doubled)
times                  ISO-8601 text                   ``timestamptz``
JSON                   text                            ``jsonb`` (read back as Python values)
vectors                float32 blobs                   pgvector ``vector`` (numpy arrays)
many ids               chunked ``IN (?, ?, ...)``      one array, ``= ANY(?)``
larger of two          ``max(a, b)``                   ``GREATEST(a, b)``
change number column   ``vec_seq``                     ``change_seq``
=====================  ==============================  =====================================
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import numpy as np

from memlane._ids import to_iso
from memlane.store.base import CHUNK, Vector


class Dialect:
    """The SQL differences of one backend (the defaults are SQLite's)."""

    #: Backend name, for messages.
    name = "sqlite"
    #: The column that numbers changes of ``memories`` (the search caches' feed).
    seq_column = "vec_seq"
    #: The larger of two values (used by upserts that keep the larger).
    greatest = "max"
    #: The ``owner`` column as a filter beside a lookup by key. SQLite: ``+owner``, the unary
    #: plus keeps its planner off the owner indexes (measured at 100,000 memories: an ``IN``
    #: list of 3 ids read by walking every row of the owner, 100 ms against 0.2 ms).
    owner_filter = "+owner"
    #: Planner hint of the exact-hash lookup (SQLite: the hash index, not the date order).
    hash_hint = "INDEXED BY memories_scope_hash"
    #: Whether statements can travel together in one round trip (PostgreSQL's pipeline mode).
    pipelines = False
    #: The driver's base error class(es): what :func:`memlane.store.sql.errors.translating`
    #: turns into memlane errors.
    errors: tuple[type[BaseException], ...] = ()
    #: The statement that lets the open transaction commit without waiting for its log to
    #: reach the disk (``None``: nothing to do). SQLite's commits never wait for the disk
    #: (WAL with ``synchronous = NORMAL``: a commit survives the process, not a power cut);
    #: PostgreSQL's do by default, and ``SET LOCAL synchronous_commit = off`` gives the
    #: transaction SQLite's guarantee (lost only with the server or the machine, never torn).
    async_commit_sql: str | None = None

    def sql(self, text: str) -> str:
        """``text`` (``?`` placeholders) in the driver's placeholder style."""
        return text

    def time_in(self, value: datetime | None) -> Any:
        """A time as a parameter of this backend."""
        return None if value is None else to_iso(value)

    def time_out(self, value: Any) -> datetime | None:
        """A time read back, as an aware UTC datetime (SQLite: the text :func:`to_iso` wrote;
        :func:`~memlane._ids.from_iso` inlined: ~36 memory rows a turn, four times each)."""
        return None if value is None else datetime.fromisoformat(value)

    def json_out(self, value: Any) -> Any:
        """A JSON column read back, as Python values (a new object each call)."""
        if value == "{}":  # most metadata: no parse
            return {}
        return json.loads(value) if isinstance(value, str | bytes) else value

    def vec_in(self, vector: Vector) -> Any:
        """A ``(dimension,)`` float32 vector as a parameter."""
        return np.asarray(vector, dtype=np.float32).tobytes()

    def vec_out(self, value: Any) -> Vector:
        """A stored vector read back as a float32 array."""
        return np.frombuffer(value, dtype=np.float32)

    def chunks(self, keys: Sequence[Any]) -> Iterator[list[Any]]:
        """``keys`` in the slices one statement takes (SQLite: at most
        :data:`~memlane.store.base.CHUNK`, below its bound-parameter limit); none for none."""
        for i in range(0, len(keys), CHUNK):
            yield list(keys[i : i + CHUNK])

    def in_list(
        self, column: str, chunk: Sequence[Any], kind: str = "text"
    ) -> tuple[str, list[Any]]:
        """``(condition, args)`` selecting the rows whose ``column`` is among ``chunk`` (one
        slice of :meth:`chunks`; ``kind``: ``text`` or ``bigint``)."""
        return f"{column} IN ({','.join('?' * len(chunk))})", list(chunk)

    def in_lists(
        self, column: str, keys: Sequence[Any], kind: str = "text"
    ) -> Iterator[tuple[str, list[Any]]]:
        """``(condition, args)`` pairs that together select the rows whose ``column`` is among
        ``keys``; nothing for no keys."""
        for chunk in self.chunks(keys):
            yield self.in_list(column, chunk, kind)

    def execute(self, conn: Any, sql: str, args: Sequence[Any] | None, binary: bool) -> Any:
        """Run one statement on a driver connection; the driver's cursor."""
        return conn.execute(sql) if args is None else conn.execute(sql, args)

    def executemany(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each of ``rows``."""
        conn.executemany(sql, rows)

    def batch(
        self, conn: Any, statements: Sequence[tuple[str, Sequence[Any] | None]], binary: bool
    ) -> list[Any]:
        """Run ``statements`` in order; their cursors (SQLite: one after the other; a backend
        that :attr:`pipelines` sends them in one round trip)."""
        return [self.execute(conn, sql, args, binary) for sql, args in statements]


class PgDialect(Dialect):
    """PostgreSQL's differences (here, not in the backend package, so that the SQL of both lives
    side by side; importing it needs no driver)."""

    name = "postgres"
    pipelines = True
    seq_column = "change_seq"
    greatest = "GREATEST"
    owner_filter = "owner"
    hash_hint = ""
    async_commit_sql = "SET LOCAL synchronous_commit = off"

    def sql(self, text: str) -> str:
        return _pg_sql(text)

    def time_in(self, value: datetime | None) -> Any:
        return value

    def time_out(self, value: Any) -> datetime | None:
        return None if value is None else value.astimezone(UTC)

    def vec_in(self, vector: Vector) -> Any:
        return np.asarray(vector, dtype=np.float32)

    def vec_out(self, value: Any) -> Vector:
        return np.asarray(value, dtype=np.float32)

    def chunks(self, keys: Sequence[Any]) -> Iterator[list[Any]]:
        """All ``keys`` at once: one array parameter takes any number."""
        if keys:
            yield list(keys)

    def in_list(
        self, column: str, chunk: Sequence[Any], kind: str = "text"
    ) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?::{kind}[])", [list(chunk)]

    def execute(self, conn: Any, sql: str, args: Sequence[Any] | None, binary: bool) -> Any:
        if args is None:
            return conn.execute(sql.encode(), binary=binary)
        return conn.execute(_pg_sql(sql), args, binary=binary)

    def executemany(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with conn.cursor() as cur:
            cur.executemany(_pg_sql(sql), rows)

    def batch(
        self, conn: Any, statements: Sequence[tuple[str, Sequence[Any] | None]], binary: bool
    ) -> list[Any]:
        """Every statement in one pipeline: one round trip (psycopg's pipeline mode)."""
        with conn.pipeline():
            return [self.execute(conn, sql, args, binary) for sql, args in statements]


@lru_cache(maxsize=1024)
def _pg_sql(text: str) -> str:
    return text.replace("%", "%%").replace("?", "%s")


#: Observers of the store's traffic: each is called with ``(backend, statements)`` once per
#: round trip to the database (PostgreSQL: each exchange with the server, however many
#: statements it carries; SQLite, in process: each statement, except that a batch
#: (:meth:`Q.batch`: statements the store runs one after the other under one hold of its lock,
#: with no work of the caller between them) counts as one, like PostgreSQL's pipeline). For tests and benchmarks that count
#: what a turn costs; empty (no cost) otherwise.
OBSERVERS: list[Callable[[str, int], None]] = []


def observe(dialect: Dialect, statements: int) -> None:
    """Tell the :data:`OBSERVERS` of one round trip carrying ``statements``."""
    for observer in OBSERVERS:
        observer(dialect.name, statements)


class Q:
    """A query handle: one driver connection and its dialect. The parts of the store get one
    from :class:`~memlane.store.sql.database.Database` (for a read, a write, or committed rows
    only) and never see the driver. SQL is written with ``?`` placeholders; ``args=None`` runs
    the text as it is (a script or a statement without parameters).

    Statements that return nothing the caller needs may be :meth:`defer`-red: on a backend that
    pipelines (PostgreSQL) they travel with the next round trip (the next statement, or the
    commit), in order; elsewhere they run at once. An error in one surfaces with that next
    round trip, inside the same transaction."""

    __slots__ = ("conn", "dialect", "pending")

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect
        #: Statements waiting for the next round trip (see :meth:`defer`).
        self.pending: list[tuple[str, Sequence[Any] | None]] = []

    def _cursor(self, sql: str, args: Sequence[Any] | None, binary: bool) -> Any:
        if self.pending:
            cursors = self.dialect.batch(self.conn, [*self.pending, (sql, args)], binary)
            observe(self.dialect, len(self.pending) + 1)
            self.pending.clear()
            return cursors[-1]
        observe(self.dialect, 1)
        return self.dialect.execute(self.conn, sql, args, binary)

    def all(
        self, sql: str, args: Sequence[Any] | None = None, *, binary: bool = False
    ) -> list[Sequence[Any]]:
        """Every row of ``sql``. ``binary``: ask for the driver's binary form (PostgreSQL's
        vectors arrive as float32 bytes, not text to parse)."""
        return list(self._cursor(sql, args, binary).fetchall())

    def one(self, sql: str, args: Sequence[Any] | None = None) -> Sequence[Any] | None:
        """The first row of ``sql`` (``None``: no row); the rest are read and dropped (a
        statement with ``RETURNING`` runs to its end)."""
        rows = self.all(sql, args)
        return rows[0] if rows else None

    def run(self, sql: str, args: Sequence[Any] | None = None) -> int:
        """Run ``sql``; the number of rows it changed."""
        return int(self._cursor(sql, args, False).rowcount)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once for each of ``rows`` (nothing for none): one round trip."""
        if not rows:
            return
        if self.dialect.pipelines:
            self.batch([(sql, row) for row in rows])
            return
        self.flush()
        observe(self.dialect, len(rows))
        self.dialect.executemany(self.conn, sql, rows)

    def batch(
        self, statements: Sequence[tuple[str, Sequence[Any] | None]], *, binary: bool = False
    ) -> list[list[Sequence[Any]]]:
        """Run ``statements`` in order, in one round trip where the backend pipelines; the
        rows of each (``[]`` for a statement that returns none). ``binary``: as :meth:`all`'s,
        for every statement of the batch (one that reads embeddings: PostgreSQL's text form
        of a 384-dimension vector costs ~0.1 ms to parse, ~120 of them an injection turn)."""
        if not statements:
            return []
        if not self.dialect.pipelines:  # in process: one call of the store, one "trip"
            out: list[list[Sequence[Any]]] = []
            for sql, args in statements:
                cursor = self.dialect.execute(self.conn, sql, args, binary)
                out.append(list(cursor.fetchall()) if cursor.description else [])
            observe(self.dialect, len(statements))
            return out
        todo = [*self.pending, *statements]
        self.pending.clear()
        cursors = self.dialect.batch(self.conn, todo, binary)
        observe(self.dialect, len(todo))
        out = [list(c.fetchall()) if c.description else [] for c in cursors]
        return out[len(todo) - len(statements) :]

    def defer(self, sql: str, args: Sequence[Any] | None = None) -> None:
        """Run ``sql`` with the next round trip (see the class docstring)."""
        if self.dialect.pipelines:
            self.pending.append((sql, args))
        else:
            self.run(sql, args)

    def defer_all(self, statements: Sequence[tuple[str, Sequence[Any] | None]]) -> None:
        """:meth:`defer` each of ``statements``; elsewhere they run at once as one batch."""
        if self.dialect.pipelines:
            self.pending.extend(statements)
        else:
            self.batch(statements)

    def flush(self) -> None:
        """Send the deferred statements now (one round trip; nothing when none wait)."""
        if self.pending:
            todo = list(self.pending)
            self.pending.clear()
            self.dialect.batch(self.conn, todo, False)
            observe(self.dialect, len(todo))
