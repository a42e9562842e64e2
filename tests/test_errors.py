"""Errors: every driver error becomes a :class:`MemlaneError` subclass, and the CLI prints one
``error:`` line and exits with the code of its class (docs/errors.md).

The store scenarios run ``memlane`` in a child process against a real file: another process
holding the write lock past ``busy_timeout_ms``, a read-only store, a corrupt file, a folder that
cannot be created, a full disk (``PRAGMA max_page_count`` set by a wrapper around
``sqlite3.connect`` in the child: no test hook in memlane itself).
"""

from __future__ import annotations

import errno
import inspect
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memlane.errors as error_module
from conftest import REPO, Backend
from memlane import (
    ConfigError,
    CorruptStore,
    MemlaneError,
    MemoryEngine,
    ReadOnlyStore,
    StoreBusy,
    StoreError,
)
from memlane.cli import app
from memlane.cli.app import EXIT_CODES, INTERNAL_ERROR, USAGE_ERROR
from memlane.store.sqlite.errors import translate

ERROR_CLASSES = sorted(
    (
        obj
        for obj in vars(error_module).values()
        if inspect.isclass(obj) and issubclass(obj, MemlaneError)
    ),
    key=lambda cls: cls.__name__,
)

# ---------------------------------------------------------------------------------------------
# the tree and its exit codes


def test_store_error_carries_operation_and_path() -> None:
    plain = StoreError("the store is closed")
    assert str(plain) == "the store is closed"
    assert plain.operation is None and plain.path is None
    full = StoreBusy("busy", operation="insert", path="/x/memlane.db")
    assert (full.operation, full.path) == ("insert", Path("/x/memlane.db"))
    assert isinstance(full, StoreError) and isinstance(full, MemlaneError)
    for cls in (StoreBusy, ReadOnlyStore, CorruptStore):
        assert issubclass(cls, StoreError)


def test_every_class_has_its_own_documented_exit_code() -> None:
    codes = {cls: cls.exit_code for cls in ERROR_CLASSES}
    # one code per class, except the documented pairs that share one
    shared = {
        frozenset({"InvalidMemory", "InvalidArgument"}),
        frozenset({"EmbeddingError", "EmbeddingMismatch"}),
    }
    by_code: dict[int, set[str]] = {}
    for cls, code in codes.items():
        by_code.setdefault(code, set()).add(cls.__name__)
    for names in by_code.values():
        assert len(names) == 1 or frozenset(names) in shared, names
    assert set(codes.values()) | {0, USAGE_ERROR, INTERNAL_ERROR} == set(EXIT_CODES)
    assert USAGE_ERROR not in codes.values() and INTERNAL_ERROR not in codes.values()

    docstring = error_module.__doc__ or ""
    page = (REPO / "docs" / "errors.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", page, flags=re.MULTILINE))
    assert {int(code) for code in table} == set(EXIT_CODES)
    for cls in ERROR_CLASSES:
        line = next(ln for ln in docstring.splitlines() if f" {cls.__name__} " in f"{ln} ")
        assert line.rstrip().endswith(f"exit {cls.exit_code}"), line
        if cls is not MemlaneError:
            assert f"`{cls.__name__}`" in table[str(cls.exit_code)], cls
    help_text = " ".join(CliRunner().invoke(app, ["--help"]).stdout.split())
    for code in EXIT_CODES:
        assert f"{code} " in help_text.split("Exit codes:")[1]


# ---------------------------------------------------------------------------------------------
# translate(): driver errors -> memlane errors


def _raised(fn: object) -> sqlite3.Error:
    try:
        fn()  # type: ignore[operator]
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("no error")


def test_translate_busy(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(db, isolation_level=None, timeout=0.05)
    try:
        exc = translate(_raised(lambda: other.execute("BEGIN IMMEDIATE")), "begin", db, waited_s=2)
    finally:
        other.close()
        holder.close()
    assert type(exc) is StoreBusy
    assert (exc.operation, exc.path) == ("begin", db)
    text = str(exc)
    assert str(db) in text and "2.0 s" in text
    assert "another memlane process" in text and "busy_timeout_ms" in text


def test_translate_read_only(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        exc = translate(_raised(lambda: conn.execute("INSERT INTO t VALUES (1)")), "insert", db)
    finally:
        conn.close()
    assert type(exc) is ReadOnlyStore
    assert str(db) in str(exc) and "permissions" in str(exc)


def test_translate_not_a_database(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    db.write_bytes(b"this is not a database, just some text " * 200)
    conn = sqlite3.connect(db)
    try:
        exc = translate(_raised(lambda: conn.execute("SELECT * FROM sqlite_master")), "open", db)
    finally:
        conn.close()
    assert type(exc) is CorruptStore
    assert str(db) in str(exc) and "backup" in str(exc)


def test_translate_full(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("PRAGMA max_page_count = 3")
    try:
        exc = translate(
            _raised(lambda: conn.execute("INSERT INTO t VALUES (randomblob(100000))")),
            "insert",
            db,
        )
    finally:
        conn.close()
    assert type(exc) is StoreError
    assert str(db) in str(exc) and "disk is full" in str(exc)


def test_translate_cannot_open(tmp_path: Path) -> None:
    db = tmp_path / "missing" / "memlane.db"
    exc = translate(_raised(lambda: sqlite3.connect(db)), "open", db)
    assert type(exc) is StoreError
    assert str(db) in str(exc) and str(db.parent) in str(exc)


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        (sqlite3.OperationalError("database is locked"), StoreBusy),
        (sqlite3.OperationalError("attempt to write a readonly database"), ReadOnlyStore),
        (sqlite3.DatabaseError("database disk image is malformed"), CorruptStore),
        (sqlite3.DatabaseError("file is not a database"), CorruptStore),
        (sqlite3.OperationalError("cannot rollback - no transaction is active"), StoreError),
        (sqlite3.ProgrammingError("Cannot operate on a closed database."), StoreError),
    ],
)
def test_translate_by_message_when_there_is_no_code(
    driver: sqlite3.Error, expected: type[StoreError]
) -> None:
    assert getattr(driver, "sqlite_errorcode", None) is None
    exc = translate(driver, "commit", "/data/memlane.db")
    assert type(exc) is expected
    assert "/data/memlane.db" in str(exc) and str(driver) in str(exc)
    assert exc.operation == "commit"


@pytest.mark.parametrize(
    ("os_error", "expected", "words"),
    [
        (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/f/home"), StoreError, "folder"),
        (FileExistsError(errno.EEXIST, "File exists", "/f/home"), StoreError, "folder"),
        (PermissionError(errno.EACCES, "Permission denied", "/f/home"), ReadOnlyStore, "perm"),
        (OSError(errno.EROFS, "Read-only file system", "/f/home"), ReadOnlyStore, "perm"),
        (OSError(errno.ENOSPC, "No space left on device"), StoreError, "disk is full"),
    ],
)
def test_translate_os_errors(os_error: OSError, expected: type[StoreError], words: str) -> None:
    exc = translate(os_error, "open", "/f/home/memlane.db")
    assert type(exc) is expected
    assert "/f/home/memlane.db" in str(exc) and words in str(exc)


# ---------------------------------------------------------------------------------------------
# the CLI: one line, the class's code, a traceback only with --debug


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_cli_exits_with_the_code_of_the_class(
    cls: type[MemlaneError], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    error = (
        ConfigError("store.path", 3, "a path")
        if cls is ConfigError
        else cls("it went wrong\non two lines")
    )

    def broken_open(*args: object, **kwargs: object) -> MemoryEngine:
        raise error

    monkeypatch.setattr(MemoryEngine, "open", broken_open)
    result = CliRunner().invoke(app, ["list", "--home", str(tmp_path)])
    assert result.exit_code == cls.exit_code, result.stderr
    assert result.stderr.splitlines() == [f"error: {' '.join(str(error).split(chr(10)))}"]
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize("how", ["flag", "env", "none"])
def test_unexpected_exception_is_one_line_and_a_traceback_only_with_debug(
    how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken_open(*args: object, **kwargs: object) -> MemoryEngine:
        raise RuntimeError("something broke\ninside")

    monkeypatch.setattr(MemoryEngine, "open", broken_open)
    if how == "env":
        monkeypatch.setenv("MEMLANE_DEBUG", "1")
    args = ["--debug"] if how == "flag" else []
    result = CliRunner().invoke(app, [*args, "list", "--home", str(tmp_path)])
    assert result.exit_code == INTERNAL_ERROR
    lines = _error_lines(result.stderr)
    assert lines == [
        "error: internal error: RuntimeError: something broke inside; "
        "rerun with --debug for the traceback"
    ]
    assert result.stderr.rstrip().splitlines()[-1] == lines[0]
    if how == "none":
        assert result.stderr.splitlines() == lines
    else:
        assert "Traceback (most recent call last)" in result.stderr
        assert "broken_open" in result.stderr


def test_usage_errors_keep_click_code() -> None:
    assert CliRunner().invoke(app, ["list", "--no-such-option"]).exit_code == USAGE_ERROR


# ---------------------------------------------------------------------------------------------
# real store failures, in a child process


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def error(self) -> str:
        """The one ``error:`` line (asserting there is exactly one and no traceback)."""
        lines = _error_lines(self.stderr)
        assert len(lines) == 1, self.stderr
        assert "Traceback" not in self.stderr, self.stderr
        return lines[0]


def child(
    backend: Backend,
    *args: str,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
    timeout: float = 60,
) -> Run:
    """Run ``python -m memlane ARGS`` in a child process on ``backend``'s store."""
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "memlane", *args],
        env={**backend.child_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def make_store(backend: Backend, n: int = 3) -> Path:
    """A closed store of ``n`` memories; its file."""
    engine = backend.engine()
    for i in range(n):
        engine.add(f"memory number {i} about the {['garden', 'kitchen', 'garage'][i % 3]}")
    backend.close_all()
    return Path(backend.store_settings()["path"])


def count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
    finally:
        conn.close()


@contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """This process holds the store's write lock (``BEGIN IMMEDIATE``) until the block ends."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
    finally:
        conn.close()


BUSY_MS = 300


def test_a_writer_gives_up_after_busy_timeout_with_store_busy(sqlite_backend: Backend) -> None:
    db = make_store(sqlite_backend)
    env = {"MEMLANE_STORE__BUSY_TIMEOUT_MS": str(BUSY_MS)}
    with write_lock_held(db):
        run = child(sqlite_backend, "add", "a memory written while locked", env=env, timeout=20)
    assert run.code == StoreBusy.exit_code, run.stderr
    assert str(db) in run.error and "busy_timeout_ms" in run.error
    # One deadline of 300 ms, not a retry loop multiplying it (the defect: 30 s and more): the
    # child's 20 s limit above catches that with a wide margin; no finer wall-clock assertion,
    # since a loaded machine can stretch 300 ms into seconds.
    assert count(db) == 3


def test_a_reader_does_not_wait_for_the_write_lock(sqlite_backend: Backend) -> None:
    """WAL mode: reading needs no write lock, so another process's long transaction does not
    block ``memlane list`` (opening the store must not take the write lock when it has nothing
    to migrate)."""
    db = make_store(sqlite_backend)
    env = {"MEMLANE_STORE__BUSY_TIMEOUT_MS": str(BUSY_MS)}
    with write_lock_held(db):
        run = child(sqlite_backend, "list", "--json", env=env, timeout=20)
    # The lock is held for the whole run: a reader that needed it would have failed with
    # StoreBusy after busy_timeout_ms, so exit 0 and the rows prove it never waited for it.
    assert run.code == 0, run.stderr
    assert len(json.loads(run.stdout)) == 3


def _unprivileged() -> list[str]:
    """A command prefix under which file permissions apply: none for a normal user; for root,
    ``setpriv`` dropping the capabilities that bypass them (root ignores a file's mode)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file permissions cannot be enforced")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop capabilities here: {probe.stderr!r}")
    return prefix


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_store_is_read_only_store(sqlite_backend: Backend, what: str) -> None:
    db = make_store(sqlite_backend)
    prefix = _unprivileged()
    files = [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
    modes = {p: p.stat().st_mode for p in [*files, db.parent]}
    try:
        for p in files:
            p.chmod(0o444)
        if what == "folder":
            db.parent.chmod(0o555)
        run = child(sqlite_backend, "add", "a memory for a read-only store", prefix=prefix)
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert run.code == ReadOnlyStore.exit_code, run.stderr
    assert str(db) in run.error and "permissions" in run.error
    assert count(db) == 3


def test_a_corrupt_file_is_corrupt_store(sqlite_backend: Backend) -> None:
    db = make_store(sqlite_backend)
    db.write_bytes(os.urandom(64 * 1024))
    for args in (["add", "a memory for a broken file"], ["list"], ["search", "garden"]):
        run = child(sqlite_backend, *args)
        assert run.code == CorruptStore.exit_code, (args, run.stderr)
        assert str(db) in run.error and "backup" in run.error


def test_a_damaged_database_is_corrupt_store(sqlite_backend: Backend) -> None:
    """A valid header (page 1) over damaged pages: SQLite opens it, then finds it malformed."""
    db = make_store(sqlite_backend, n=60)
    page = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(db.read_bytes())
    data[page:] = bytes(range(256)) * ((len(data) - page) // 256) + b"\0" * (
        (len(data) - page) % 256
    )
    db.write_bytes(bytes(data))
    run = child(sqlite_backend, "list", "--json")
    assert run.code == CorruptStore.exit_code, run.stderr
    assert str(db) in run.error and "backup" in run.error


def test_a_folder_that_cannot_be_created_is_a_store_error(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a regular file where the store's folder should be")
    db = blocker / "store" / "memlane.db"
    run = child(sqlite_backend, "add", "anything", env={"MEMLANE_STORE__PATH": str(db)})
    assert run.code == StoreError.exit_code, run.stderr
    assert str(db) in run.error and "folder" in run.error


#: Runs the CLI with every SQLite connection capped at its size now plus argv[1] pages: the
#: store "fills the disk" partway through (PRAGMA max_page_count).
FULL_DISK = textwrap.dedent(
    """
    import sqlite3, sys

    extra = int(sys.argv[1])
    _connect = sqlite3.connect

    def connect(*args, **kwargs):
        conn = _connect(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + extra}")
        return conn

    sqlite3.connect = connect
    sys.argv = ["memlane", *sys.argv[2:]]
    from memlane.cli import main
    main()
    """
)


@pytest.mark.parametrize("extra_pages", [2, 40, 300, 700])
def test_a_full_disk_stops_the_import_with_one_error_line(
    sqlite_backend: Backend, tmp_path: Path, extra_pages: int
) -> None:
    from memlane.cli.memories import IMPORT_CHUNK

    db = make_store(sqlite_backend)
    lines = [
        f"full disk line {i}: the quick brown fox number {i * 7919 % 10007}" for i in range(1000)
    ]
    file = tmp_path / "lines.jsonl"
    file.write_text("".join(json.dumps({"content": t}) + "\n" for t in lines), encoding="utf-8")

    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(extra_pages), "import", str(file), "--json"],
        env=sqlite_backend.child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    run = Run(proc.returncode, proc.stdout, proc.stderr)
    assert run.code == StoreError.exit_code, run.stderr
    assert "disk is full" in run.error and str(db) in run.error

    # the store opens, is whole, and holds whole chunks only
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = count(db) - 3
        assert stored % IMPORT_CHUNK == 0 and stored < len(lines)
        assert (
            conn.execute("SELECT count(*) FROM memories WHERE embedding IS NULL").fetchone()[0] == 0
        )
    finally:
        conn.close()

    again = child(sqlite_backend, "import", str(file), "--json")
    assert again.code == 0, again.stderr
    assert count(db) == 3 + len(lines)
    engine = sqlite_backend.engine()
    assert {m.content for m in engine.list(limit=2000)} >= set(lines)
