"""A running ``memlane serve``'s life in its home: the lock (one server per home), the record
hooks read to find it (:mod:`memlane.hooks.daemon`), and the idle shutdown of a daemon.

:func:`serve` binds the socket itself (port 0 for a daemon: a free loopback port), writes
``<home>/run/server.json`` once the model is loaded, runs uvicorn on that socket, and removes
the record when it stops. With ``idle_shutdown_s`` an :class:`IdleTracker` around the app
counts requests, and a watcher thread stops uvicorn after that many seconds without one.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from memlane.hooks.daemon import adopt_lock, read_record, stop, take_lock
from memlane.server.record import RecordKeeper

log = logging.getLogger("memlane.server")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Activity:
    """The time of the last request and the number in flight, in shared memory: one object
    counts the requests of every worker process of a server (``ctx``: the multiprocessing
    context the workers are started with; passed to them when they start)."""

    def __init__(self, ctx: BaseContext | None = None) -> None:
        ctx = ctx or multiprocessing.get_context()
        # time.monotonic() is one clock for every process of the machine (CLOCK_MONOTONIC).
        self._last = ctx.Value("d", time.monotonic())
        self._flight = ctx.Value("i", 0)

    def begin(self) -> None:
        with self._flight.get_lock():
            self._flight.value += 1
            self._last.value = time.monotonic()

    def end(self) -> None:
        with self._flight.get_lock():
            self._flight.value -= 1
            self._last.value = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since the last request ended (0 while one is in flight)."""
        with self._flight.get_lock():
            return 0.0 if self._flight.value else time.monotonic() - self._last.value


class IdleTracker:
    """ASGI wrapper: counts requests in ``activity`` (its own when None)."""

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        activity: Activity | None = None,
    ) -> None:
        self.app = app
        self.activity = activity or Activity()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.activity.begin()
        try:
            await self.app(scope, receive, send)
        finally:
            self.activity.end()

    def idle_s(self) -> float:
        """Seconds since the last request ended (0 while one is in flight)."""
        return self.activity.idle_s()


class HomeLockBusy(Exception):
    """Another server of this home holds its lock (the message names it)."""


def acquire(home: Path, *, daemon: bool, lock_fd: int | None = None) -> int:
    """The home's server lock. A foreground server stops a daemon that holds it (SIGTERM,
    then waits for the lock up to 15 s); a daemon never waits. ``lock_fd``: the lock the hook
    that started this daemon took and handed down (:func:`memlane.hooks.daemon.start_daemon`).

    Raises:
        HomeLockBusy: the lock is held by a foreground server, or (daemon) by anyone, or
            ``lock_fd`` does not hold it.
    """
    if lock_fd is not None:
        try:
            return adopt_lock(lock_fd)
        except OSError as exc:
            raise HomeLockBusy(f"--lock-fd {lock_fd} holds no lock of {home} ({exc})") from None
    fd = take_lock(home)
    if fd is not None:
        return fd
    record, _ = read_record(home)
    who = f"pid {record['pid']} at {record['url']}" if record else "a server that is starting"
    if daemon or record is None or not record.get("daemon"):
        raise HomeLockBusy(f"another memlane server serves {home} ({who})")
    log.info("stopping the memlane daemon of this home (%s)", who)
    stop(home)
    end = time.monotonic() + 15
    while time.monotonic() < end:
        fd = take_lock(home)
        if fd is not None:
            return fd
        time.sleep(0.1)
    raise HomeLockBusy(f"the daemon of {home} ({who}) did not stop within 15 s")


#: Seconds uvicorn gives the requests in flight to finish once asked to stop.
GRACE_S = 30


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one). Raises ``OSError``."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets whose proto says
    # TCP (``asyncio.base_events._set_nodelay``), and the connections accepted here inherit it.
    # Without it a keep-alive client waits ~40 ms a response (Nagle's algorithm holding the
    # body behind the headers until the client's delayed ACK): measured 44 ms a /health.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    from memlane.server.limits import BACKLOG

    sock.bind((host.strip("[]"), port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if host in {"0.0.0.0", "::"}:
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def record_of(
    sock: socket.socket,
    *,
    home: Path,
    token: str,
    store_id: str,
    daemon: bool,
    idle_shutdown_s: float,
    workers: int = 1,
) -> dict[str, Any]:
    """What ``<home>/run/server.json`` says of this server (the pid: this process's, the one to
    stop, also when it runs ``workers`` worker processes)."""
    return {
        "url": url_of(sock),
        "pid": os.getpid(),
        "home": str(home),
        "store_id": store_id,
        "token": token,
        "daemon": daemon,
        "idle_shutdown_s": idle_shutdown_s,
        "workers": workers,
        "started_at": datetime.now(UTC).isoformat(),
    }


def watch_idle(
    activity: Activity, idle_shutdown_s: float, stop_now: Callable[[], None]
) -> threading.Event:
    """A thread calling ``stop_now`` once ``activity`` has been idle ``idle_shutdown_s``
    seconds (looked at every second); set the returned event to end it first."""
    stopped = threading.Event()

    def watch() -> None:
        while not stopped.wait(1.0):
            if activity.idle_s() >= idle_shutdown_s:
                log.info("idle for %.0f s: shutting down", idle_shutdown_s)
                stop_now()
                return

    threading.Thread(target=watch, name="memlane-idle", daemon=True).start()
    return stopped


def log_to_stderr() -> None:
    """The server's own notices (reloads, errors) on stderr; the engine's per-call INFO lines
    only with ``-v`` (a line per turn is too much for a service, and with ``-v`` the CLI has
    set the handler already)."""
    root = logging.getLogger("memlane")
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("memlane.server").setLevel(logging.INFO)


def serve(
    app: Any,
    *,
    home: Path,
    sock: socket.socket,
    token: str,
    store_id: str,
    daemon: bool,
    idle_shutdown_s: float,
    overrides: dict[str, Any] | None = None,
) -> None:
    """Run uvicorn on ``sock`` in this process until SIGTERM/^C (or ``idle_shutdown_s``
    without a request, when above 0), with this server's record in ``home`` meanwhile, kept
    true (:class:`~memlane.server.record.RecordKeeper`; ``overrides``: the settings kept
    across reloads)."""
    import uvicorn

    from memlane.server.limits import GuardedServer

    tracker = IdleTracker(app)
    config = uvicorn.Config(tracker, log_level="warning" if daemon else "info")
    config.timeout_graceful_shutdown = GRACE_S
    server = GuardedServer(config)  # timeouts and a cap on connections (issue #33)
    record = record_of(
        sock,
        home=home,
        token=token,
        store_id=store_id,
        daemon=daemon,
        idle_shutdown_s=idle_shutdown_s,
    )
    keeper = RecordKeeper(home, record, overrides)
    keeper.start()
    watcher = None
    if idle_shutdown_s > 0:
        watcher = watch_idle(tracker.activity, idle_shutdown_s, lambda: _exit(server))
    try:
        server.run(sockets=[sock])
    finally:
        if watcher is not None:
            watcher.set()
        keeper.stop()


def _exit(server: Any) -> None:
    server.should_exit = True
