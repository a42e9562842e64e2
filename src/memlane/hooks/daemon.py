"""Which server serves a home's store, and the memory daemon a hook starts when none does.

``memlane serve`` records who it is in ``<home>/run/server.json`` (URL, pid, store id, the
token it requires, whether it is a daemon), readable by its user only, and removes it when it
stops. A hook uses a server only when it serves the hook's own store: the one recorded in the
hook's home (or the URL the user set in ``[hooks] url``), never whatever answers on a port.

When no server serves the home, the hook answers its call in-process and starts a daemon in
the background (``[hooks] autostart``): ``memlane serve --daemon`` detached from the client
(its own session), on a random loopback port, with a random bearer token (in the record only),
shutting down after ``[hooks] idle_shutdown_s`` without a request. One per home: the server
holds an exclusive lock on ``<home>/run/server.lock`` while it runs, and a second daemon that
cannot take it exits at once.

Only what reading the record needs is imported up front (json, os, sys, time: the hook's fast
path): :mod:`pathlib`, :mod:`subprocess`, :mod:`secrets` cost milliseconds of import each and
are imported by the functions that need them. Paths are strings inside; ``home`` may be a
``str`` or a :class:`pathlib.Path`.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, TextIO

    Home = str | os.PathLike[str]

#: Folder of the record and the lock, under the home.
RUN_DIR = "run"
RECORD = "server.json"
LOCK = "server.lock"
#: Log of the daemons a hook started (their stderr), under ``<home>/logs``.
DAEMON_LOG = "daemon.log"


def run_dir(home: Home) -> str:
    """``<home>/run``."""
    return os.path.join(home, RUN_DIR)


def record_file(home: Home) -> str:
    """``<home>/run/server.json`` as a string."""
    return os.path.join(home, RUN_DIR, RECORD)


def record_path(home: Home) -> Path:
    """``<home>/run/server.json``."""
    from pathlib import Path

    return Path(record_file(home))


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    try:  # a child that exited but was not reaped yet (Linux)
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def read_record(home: Home) -> tuple[dict[str, Any] | None, str]:
    """The record of the server serving ``home`` and ``""``, or ``None`` and why there is
    none (no record, unreadable, or its process is gone)."""
    path = record_file(home)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None, f"no memlane server serves this home (no {path})"
    except (OSError, ValueError) as exc:
        return None, f"{path} is unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None, f"{path} is not a server record"
    pid = data.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return None, f"the server recorded in {path} (pid {pid}) is gone"
    return data, ""


def write_record(home: Home, record: dict[str, Any]) -> Path:
    """Write ``record`` as ``<home>/run/server.json``, readable by its user only (it holds the
    token), atomically. Returns the path."""
    folder = run_dir(home)
    os.makedirs(folder, exist_ok=True, mode=0o700)
    tmp = os.path.join(folder, f".{RECORD}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=2)
    os.replace(tmp, record_file(home))
    return record_path(home)


def remove_record(home: Home, pid: int) -> None:
    """Remove the record if it is still process ``pid``'s (a newer server's is kept)."""
    path = record_file(home)
    try:
        with open(path, encoding="utf-8") as fh:
            if json.load(fh).get("pid") == pid:
                os.unlink(path)
    except (OSError, ValueError, AttributeError):
        pass


def take_lock(home: Home) -> int | None:
    """An exclusive, non-blocking lock on ``<home>/run/server.lock``: its file descriptor
    (held until closed or the process ends), or ``None`` when another process holds it."""
    import fcntl

    folder = run_dir(home)
    os.makedirs(folder, exist_ok=True, mode=0o700)
    fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    # The holder's pid, so that :func:`stop` can reach a server that is still starting (it
    # writes its record only once its model is loaded: seconds in which it has no record).
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def lock_holder(home: Home) -> int | None:
    """The pid of the process holding ``home``'s server lock (written by :func:`take_lock`),
    or ``None`` when the lock is free or its file names no pid."""
    if not lock_held(home):
        return None
    try:
        with open(os.path.join(run_dir(home), LOCK), encoding="ascii") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def lock_held(home: Home) -> bool:
    """True while a server of ``home`` holds its lock (starting or serving)."""
    fd = take_lock(home)
    if fd is None:
        return True
    os.close(fd)
    return False


def new_token() -> str:
    """A random bearer token for a daemon (256 bits)."""
    import secrets

    return secrets.token_urlsafe(32)


def start_daemon(home: Home, idle_shutdown_s: float, log: TextIO | None = None) -> int | None:
    """Start ``memlane serve --daemon`` for ``home`` in the background, detached (its own
    session: the client's ^C or exit does not stop it), unless a server of ``home`` holds the
    lock already. Returns the new process's pid, or ``None`` when none was started."""
    import subprocess

    if lock_held(home):
        return None
    logs = os.path.join(home, "logs")
    os.makedirs(logs, exist_ok=True)
    args = [sys.executable, "-m", "memlane", "serve", "--home", os.fspath(home), "--daemon"]
    args += ["--idle-shutdown", f"{idle_shutdown_s:g}"]
    with open(os.path.join(logs, DAEMON_LOG), "a", encoding="utf-8") as out:
        out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(args)}\n")
        out.flush()
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )
    return proc.pid


def stop(home: Home, timeout_s: float = 10.0) -> tuple[int | None, str]:
    """Stop the server recorded in ``home`` (SIGTERM, then wait up to ``timeout_s`` for it to
    go). Returns ``(pid, "")`` once it is gone, or ``(None, why)``."""
    import signal

    record, why = read_record(home)
    if record is None:
        # a server still loading holds the lock before it writes its record: stop it too
        # (a test's teardown or `memlane hooks stop` right after a hook started a daemon)
        starting = lock_holder(home)
        if starting is None or starting == os.getpid():
            return None, why
        record = {"pid": starting}
    pid = int(record["pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError as exc:
        return None, f"cannot stop pid {pid}: {exc}"
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and pid_alive(pid):
        time.sleep(0.05)
    if pid_alive(pid):
        return None, f"pid {pid} still runs {timeout_s:g} s after SIGTERM"
    remove_record(home, pid)
    return pid, ""
