"""Which server serves a home's store, and the memory daemon a hook starts when none does.

``memlane serve`` records who it is in ``<home>/run/server.json`` (URL, pid, store id, the
token it requires, whether it is a daemon), readable by its user only, and removes it when it
stops. A hook uses a server only when it serves the hook's own store: the one recorded in the
hook's home (or the URL the user set in ``[hooks] url``), never whatever answers on a port.

The record alone is not trusted (a server killed with ``kill -9`` leaves it behind, its pid
may be reused and its port taken by another local process): before it sends the token or a
prompt, the hook sends a fresh nonce to ``GET /v1/proof`` and the server answers with
:func:`proof_of` (an HMAC keyed by ``<home>/run/secret``, a random key that only the home's
owner can read, over the nonce and its store id). An answer other than the one the record's
store id gives, and the hook sends nothing more to that port (:mod:`memlane.hooks.connect`).

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

import os
import sys
import time

from memlane import _fastjson as json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, TextIO

    Home = str | os.PathLike[str]

#: Folder of the record and the lock, under the home.
RUN_DIR = "run"
RECORD = "server.json"
LOCK = "server.lock"
#: The key of :func:`proof_of` (32 random bytes, hex), owner-only, under ``run/``.
SECRET = "secret"
#: What :func:`proof_of` signs before the nonce (a key used for nothing else).
PROOF_CONTEXT = b"memlane-server-proof-v1"
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


def secret_file(home: Home) -> str:
    """``<home>/run/secret`` as a string."""
    return os.path.join(home, RUN_DIR, SECRET)


def read_secret(home: Home) -> bytes | None:
    """The home's proof key (:func:`ensure_secret`), or ``None`` when there is none or it is
    not one (a hook then trusts no recorded server)."""
    try:
        with open(secret_file(home), "rb") as fh:
            key = fh.read(200).strip()
    except OSError:
        return None
    return key if len(key) >= 32 else None


def ensure_secret(home: Home) -> bytes:
    """The home's proof key, created when missing (64 hex digits from :func:`os.urandom`, mode
    0600 in ``run/``; a wider mode is narrowed). A server calls it before writing its record;
    a hook before it writes its cache of ``memlane.toml`` (:func:`memlane.hooks.config.read_toml`).

    Raises:
        OSError: ``run/`` cannot be written.
    """
    key = read_secret(home)
    path = secret_file(home)
    if key is not None:
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)
        return key
    os.makedirs(run_dir(home), exist_ok=True, mode=0o700)
    tmp = f"{path}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(os.urandom(32).hex())  # :mod:`secrets`' source; its import costs milliseconds
    try:  # two servers starting at once: the first key written stays
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    found = read_secret(home)
    if found is None:
        raise OSError(f"{path} holds no key")
    return found


def proof_of(key: bytes, nonce: str, store_id: str) -> str:
    """HMAC-SHA256 (hex, RFC 2104) keyed by ``key`` over :data:`PROOF_CONTEXT`, ``nonce`` and
    ``store_id``: what a server of the home answers to ``GET /v1/proof?nonce=...``."""
    return mac(key, PROOF_CONTEXT, nonce.encode("ascii"), store_id.encode("utf-8"))


def mac(key: bytes, context: bytes, *parts: bytes) -> str:
    """HMAC-SHA256 (hex, RFC 2104) keyed by ``key`` over ``context`` and ``parts``, joined by
    NUL bytes (``context`` keeps one use's MACs from serving another).

    Written out over the interpreter's built-in SHA-256 (:mod:`hmac` imports :mod:`hashlib`
    and OpenSSL: ~20 ms on every hook call); the same bytes as ``hmac.new(key, message,
    hashlib.sha256).hexdigest()`` (a test checks)."""
    sha256 = _sha256()
    message = b"\0".join((context, *parts))
    block = 64  # SHA-256's block size in bytes
    if len(key) > block:
        key = sha256(key).digest()
    key = key.ljust(block, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return str(sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest())


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` (hex), over the built-in SHA-256 (see :func:`mac`)."""
    return str(_sha256()(data).hexdigest())


def same_proof(a: str, b: str) -> bool:
    """``a == b`` in time independent of where they differ (:func:`hmac.compare_digest`,
    from :mod:`_operator`, without importing :mod:`hmac`)."""
    from _operator import _compare_digest

    return bool(_compare_digest(a.encode("ascii", "replace"), b.encode("ascii", "replace")))


def _sha256() -> Any:
    """The built-in SHA-256 constructor (``_sha2`` from Python 3.12, ``_sha256`` before; a
    build without either: :mod:`hashlib`'s)."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:
            from hashlib import sha256  # type: ignore[no-redef, unused-ignore]
    return sha256


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
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def read_record(home: Home) -> tuple[dict[str, Any] | None, str]:
    """The record of the server serving ``home`` and ``""``, or ``None`` and why there is
    none (no record, unreadable, or its process is gone). A record returned is a claim, not
    a proof: a hook checks it with ``GET /v1/proof`` before trusting it
    (:func:`memlane.hooks.connect.recorded_server`)."""
    path = record_file(home)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None, f"no memlane server serves this home (no {path})"
    except (OSError, ValueError) as exc:
        return None, f"{path} is unreadable ({type(exc).__name__}: {exc})"
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("url"), str)
        or not isinstance(data.get("store_id"), str)
    ):
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


def adopt_lock(fd: int) -> int:
    """The lock a hook took for the daemon it started (:func:`start_daemon`), inherited as
    descriptor ``fd``: checked to be ``<home>/run/server.lock``'s lock held by this open file
    (``flock`` on the holder's own open file succeeds), then marked with this process's pid.

    Raises:
        OSError: ``fd`` is not open, or does not hold the lock.
    """
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def start_daemon(home: Home, idle_shutdown_s: float, log: TextIO | None = None) -> int | None:
    """Start ``memlane serve --daemon`` for ``home`` in the background, detached (its own
    session: the client's ^C or exit does not stop it), unless a server of ``home`` holds the
    lock already. Returns the new process's pid, or ``None`` when none was started.

    One daemon however many hooks call at once: the hook takes the home's server lock itself
    and hands it to the daemon (an inherited descriptor, ``--lock-fd``), so the lock is held
    from this call on, through the seconds the daemon takes to start, to its end; a
    concurrent hook finds it held and starts none."""
    import subprocess

    fd = take_lock(home)
    if fd is None:
        return None
    try:
        logs = os.path.join(home, "logs")
        os.makedirs(logs, exist_ok=True)
        args = [sys.executable, "-m", "memlane", "serve", "--home", os.fspath(home), "--daemon"]
        args += ["--idle-shutdown", f"{idle_shutdown_s:g}", "--lock-fd", str(fd)]
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
                pass_fds=(fd,),
            )
        # the holder's pid for stop() until the daemon writes its own (adopt_lock)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(proc.pid).encode(), 0)
    finally:
        os.close(fd)
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
    if pid == os.getpid():  # a stale record naming this process (a reused pid): never itself
        return None, f"the record names this process (pid {pid}): it is stale"
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
