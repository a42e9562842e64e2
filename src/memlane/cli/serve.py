"""``memlane serve``: the HTTP API and the web pages (see docs/server.md).

FastAPI and uvicorn are imported inside the command: ``import memlane.cli`` stays light.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import signal
import socket
from importlib import import_module
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from memlane.cli.app import HomeOption, app, err, fail
from memlane.cli.render import announce_new_store, new_store, warn_loose_modes
from memlane.config import SettingProblem
from memlane.errors import ConfigError

if TYPE_CHECKING:
    from memlane.config import Settings

#: The signals that stop the server cleanly.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: ``--workers`` when not given: the CPU count up to this many (docs/server.md: measured).
DEFAULT_MAX_WORKERS = 2
#: The most ``--workers`` takes (each holds its own model and search caches).
MAX_WORKERS = 32


def _stopped(sig: int, frame: FrameType | None) -> None:
    """Handler of :data:`STOP_SIGNALS` while uvicorn runs (it handles them first)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on ``port`` (Linux ``/proc/net/tcp*``; empty elsewhere)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; field 9 is the inode
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_holder(port: int) -> str | None:
    """``"pid N (command line)"`` of the process listening on ``port``, when this user may see it
    (Linux ``/proc``), else ``None``."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:  # another user's process, or gone
            continue
        if any(_link(fd) in inodes for fd in fds):
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                cmd = ""
            return f"pid {proc.name} ({cmd or '?'})"
    return None


def _link(fd: Path) -> str:
    """Where ``/proc/PID/fd/N`` points ("" for a descriptor closed meanwhile)."""
    try:
        return os.readlink(fd)
    except OSError:
        return ""


def check_port(host: str, port: int) -> None:
    """Raise :class:`ConfigError` (exit 5) naming the process that holds ``host:port`` and what
    to do, before the model is loaded (a busy port found by uvicorn only after the model load
    printed its raw ``[Errno 98]``). The probe binds as uvicorn does (``SO_REUSEADDR``)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise ConfigError(
                    "server.host", host, f"cannot listen there ({exc.strerror})"
                ) from None
            holder = port_holder(port)
            who = f"by {holder}" if holder else "by another process"
            stop = f"stop it (kill {holder.split()[1]})" if holder else "stop that process"
            fix = (
                f"{stop}, or serve on another port (memlane serve --port {port + 1}, or "
                "[server] port in memlane.toml)"
            )
            raise SettingProblem(
                "server.port",
                port,
                f"{host}:{port} is already in use {who}: {fix}",
                f"port {port} on {host} is already in use {who}: {fix}",
            ) from None


@app.command()
def serve(
    home: HomeOption = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address to bind (default [server] host, 127.0.0.1)."),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default [server] port, 8765).")
    ] = None,
    daemon: Annotated[
        bool,
        typer.Option(
            "--daemon",
            help="Run as the home's memory daemon (what a hook starts): a free loopback port, "
            "a random token (kept in <home>/run/server.json, readable by you only), quiet; "
            "exits at once if a server of this home runs.",
        ),
    ] = False,
    idle_shutdown: Annotated[
        float,
        typer.Option(
            "--idle-shutdown",
            min=0,
            help="Stop after this many seconds without a request (0: never).",
        ),
    ] = 0.0,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=MAX_WORKERS,
            help="Worker processes, each with its own engine and model, serving one port "
            "(default: as many as the CPUs, at most 2; 1 with --daemon). More workers use "
            "more cores under concurrent clients and more memory (docs/server.md).",
        ),
    ] = None,
    lock_fd: Annotated[
        int | None,
        typer.Option(
            "--lock-fd",
            hidden=True,
            help="The home's server lock, taken by the hook that starts this daemon and "
            "inherited as this descriptor (one daemon however many hooks start one at once).",
        ),
    ] = None,
) -> None:
    """Serve the HTTP API (/v1, OpenAPI at /docs) and the web pages until SIGTERM or ^C.

    Loopback by default; another address needs a token ([server] token or
    MEMLANE_SERVER__TOKEN). A port already in use is an error naming the process that holds it
    (exit code 5), found before the model is loaded. The server records who it is in
    <home>/run/server.json (URL, pid, store id): the hooks of this home use it and no other
    server; a memory daemon of this home is stopped first (docs/integrations.md).

    Example:  memlane serve --port 8766 --workers 2"""
    from memlane.config import Settings, resolve_home
    from memlane.hooks.daemon import new_token

    settings = Settings.load(home)
    if daemon:
        token = settings.server.token or new_token()
        server_section = settings.server.model_copy(update={"token": token})
        settings = settings.model_copy(update={"server": server_section})
    bind = "127.0.0.1" if daemon else host or settings.server.host
    bind_port = 0 if daemon else port if port is not None else settings.server.port
    server_cfg = settings.server
    if not is_loopback(bind) and not (server_cfg.token or server_cfg.owner_tokens):
        raise ConfigError(
            "server.token",
            "",
            f"binding to {bind} (not loopback) needs a token: set [server] token or "
            "MEMLANE_SERVER__TOKEN, or bind to 127.0.0.1",
        )
    try:
        import_module("memlane.server.app")  # FastAPI and uvicorn: the server extra
        from memlane.server import lifecycle
    except ImportError as exc:
        raise fail(
            f"memlane serve needs the server extra: pip install 'memlane[server]' ({exc})"
        ) from None

    if not daemon:
        check_port(bind, bind_port)
    count = workers or default_workers(daemon)
    lifecycle.log_to_stderr()
    root = resolve_home(home)
    try:
        lock = lifecycle.acquire(root, daemon=daemon, lock_fd=lock_fd if daemon else None)
    except lifecycle.HomeLockBusy as exc:
        if daemon:
            err.print(f"memlane serve --daemon: {exc}; not starting")
            return
        raise fail(f"{exc}: stop it first (its pid is in {root}/run/server.json)") from None
    try:
        sock = lifecycle.bind(bind, bind_port)
    except OSError as exc:
        os.close(lock)
        raise fail(f"cannot listen on {bind}:{bind_port}: {exc.strerror or exc}") from None
    try:
        if count == 1:
            _serve_here(settings, home, root, sock, daemon, idle_shutdown)
        else:
            _serve_workers(settings, home, root, sock, daemon, idle_shutdown, count)
    finally:
        sock.close()
        os.close(lock)


def default_workers(daemon: bool) -> int:
    """``--workers`` when not given: 1 for a daemon (one user's hooks, a few calls a turn),
    else the CPU count, at most :data:`DEFAULT_MAX_WORKERS` (docs/server.md: measured)."""
    if daemon:
        return 1
    return max(1, min(DEFAULT_MAX_WORKERS, os.cpu_count() or 1))


def _serve_here(
    settings: Settings,
    home: Path | None,
    root: Path,
    sock: socket.socket,
    daemon: bool,
    idle_shutdown: float,
) -> None:
    """Serve in this process (one worker)."""
    from memlane.engine import MemoryEngine
    from memlane.server import lifecycle
    from memlane.server.app import create_app
    from memlane.server.state import ServerState

    created = new_store(settings)
    engine = MemoryEngine.open(home, settings)
    if created:
        announce_new_store(settings)
    warn_loose_modes(settings)
    try:
        err.print(f"loading the embedding model ({engine.model_name}) ...")
        engine.embed(["warm up"])  # ready only once the model answers
        kept = {"server": {"token": settings.server.token}} if daemon else None
        state = ServerState(engine, overrides=kept)
        state.start_watching()
        err.print(f"memlane serve: {lifecycle.url_of(sock)} (pid {os.getpid()})")
        try:
            # uvicorn finishes the in-flight requests on SIGTERM / SIGINT, then raises the
            # signal again under the handlers it found: these let the store close cleanly.
            previous = {sig: signal.signal(sig, _stopped) for sig in STOP_SIGNALS}
            try:
                lifecycle.serve(
                    create_app(state),
                    home=root,
                    sock=sock,
                    token=settings.server.token,
                    store_id=engine.store_id,
                    daemon=daemon,
                    idle_shutdown_s=idle_shutdown,
                    overrides=kept,
                )
            finally:
                for sig, old in previous.items():
                    signal.signal(sig, old)
        finally:
            state.stop_watching()
    finally:
        engine.close()
    err.print("memlane serve: stopped, store closed")


def _serve_workers(
    settings: Settings,
    home: Path | None,
    root: Path,
    sock: socket.socket,
    daemon: bool,
    idle_shutdown: float,
    count: int,
) -> None:
    """Serve with ``count`` worker processes (:mod:`memlane.server.workers`)."""
    from memlane.engine import MemoryEngine
    from memlane.server import workers

    # The store is created or migrated here, once, before any worker opens it.
    created = new_store(settings)
    with MemoryEngine.open(home, settings) as engine:
        store_id = engine.store_id
        model = engine.model_name
    if created:
        announce_new_store(settings)
    warn_loose_modes(settings)
    kept = {"server": {"token": settings.server.token}} if daemon else {}
    spec = workers.WorkerSpec(root, kept, daemon)
    err.print(f"starting {count} workers, each loading the embedding model ({model}) ...")

    def announce(record: dict[str, object], pids: list[int]) -> None:
        pid_list = ", ".join(map(str, pids))
        err.print(
            f"memlane serve: {record['url']} (pid {os.getpid()}, {count} workers: {pid_list})"
        )

    try:
        workers.serve(
            spec,
            count,
            sock=sock,
            token=settings.server.token,
            store_id=store_id,
            idle_shutdown_s=idle_shutdown,
            announce=announce,
        )
    except workers.WorkerFailed as exc:
        raise fail(f"memlane serve: {exc}") from None
    err.print(f"memlane serve: stopped, store closed ({count} workers)")
