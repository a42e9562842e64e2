"""What one ``memlane serve`` process lets a client hold (issue #33, docs/server.md "Limits"):
timeouts for a request head, a request body and an idle keep-alive connection, and a cap on
the connections it keeps open, below its descriptor limit.

Why: a client that connects and sends nothing (or a head a byte at a time) held a connection,
and its descriptor, for ever: uvicorn arms its keep-alive timeout only after a first response.
2,100 such connections at a 1,024 descriptor limit left the workers unable to take another
connection, ``/health`` included, for good.

- **Idle**: uvicorn closes a keep-alive connection idle :data:`KEEP_ALIVE_S` after a response
  (``timeout_keep_alive``).
- **Head**: a request head must arrive whole within :data:`HEAD_TIMEOUT_S` of the connection's
  start or of the previous response's end, however it trickles in; else the connection is
  closed (uvicorn has no such timeout). Its size: h11's limit,
  :data:`MAX_HEAD_BYTES` (uvicorn's ``h11_max_incomplete_event_size``; 400 beyond it).
- **Body**: a request whose body stops arriving for :data:`BODY_IDLE_S` is closed (the body's
  size is the app's limit, docs/server.md "Errors").
- **Cap**: a process keeps at most :func:`connection_cap` connections (its descriptor limit
  less :data:`RESERVED_FDS` for the store, the model and the logs). A connection beyond it
  closes the oldest connection that has no request in flight (a silent one first: the
  longest waiting for a head); when every one has a request in flight, the new one is closed.
  So a new client (``/health``, a hook) is served while thousands of idle or half-open ones
  knock, and the process never runs out of descriptors for its store.

Every process that serves uses :class:`GuardedServer` (``--workers 1`` on its listening socket;
each worker of ``--workers N`` on the connections handed over, :mod:`.dispatch`). What was
closed, and why, is logged at most every :data:`LOG_EVERY_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn

log = logging.getLogger("memlane.server")

#: Seconds uvicorn keeps an idle keep-alive connection after a response (its default, named).
KEEP_ALIVE_S = 5.0
#: Seconds a request head may take to arrive whole (after the connection or the last response).
HEAD_TIMEOUT_S = 10.0
#: Seconds a request body may stop arriving before the connection is closed.
BODY_IDLE_S = 30.0
#: Bytes of a request head (h11 answers 400 beyond it; uvicorn's default, named).
MAX_HEAD_BYTES = 16 * 1024
#: Descriptors a process keeps free of connections (the store's files, the model, logs, pipes).
RESERVED_FDS = 128
#: The least :func:`connection_cap` gives, however low the descriptor limit.
MIN_CAP = 16
#: Seconds between two looks at the open connections (timeouts are enforced to this much).
SWEEP_S = 1.0
#: Connections the listening socket queues before they are accepted (``listen``'s backlog;
#: the kernel caps it at ``net.core.somaxconn``).
BACKLOG = 2048
#: Seconds between two log lines about closed connections.
LOG_EVERY_S = 10.0
#: Connections accepted in one go before the event loop serves the others (asyncio's own
#: accept loop takes up to the backlog).
ACCEPT_BATCH = 16
#: Seconds accepting pauses when the process has no descriptor free.
ACCEPT_PAUSE_S = 0.05


def connection_cap(limit: int | None = None) -> int:
    """The most connections one process keeps open: ``limit`` (default: the process's soft
    ``RLIMIT_NOFILE``) less :data:`RESERVED_FDS`, at least :data:`MIN_CAP`."""
    if limit is None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit == resource.RLIM_INFINITY:
            limit = 1 << 20
    return max(MIN_CAP, int(limit) - RESERVED_FDS)


def configure(config: uvicorn.Config) -> uvicorn.Config:
    """``config`` with the limits uvicorn enforces itself (keep-alive, head size, backlog, the
    grace time of a stop stays the caller's)."""
    config.timeout_keep_alive = int(KEEP_ALIVE_S)
    config.h11_max_incomplete_event_size = MAX_HEAD_BYTES
    config.backlog = BACKLOG
    return config


@dataclass
class _Conn:
    """What the guard knows of one open connection (times: ``time.monotonic()``)."""

    #: Since when it waits for a request head (its start, or its last response's end).
    waiting_since: float
    #: When data last arrived.
    last_data: float
    #: uvicorn's request/response cycle last seen (a new one: a new request head arrived).
    cycle: Any = None
    busy: bool = False


@dataclass
class _Silent:
    """An accepted connection that has sent nothing yet (no uvicorn protocol built for it)."""

    since: float
    on_lost: Any = None


@dataclass
class _Closed:
    """Connections closed since the last log line, by reason."""

    head: int = 0
    body: int = 0
    evicted: int = 0
    refused: int = 0
    logged_at: float = field(default_factory=time.monotonic)


class Guard:
    """The open connections of one process and their limits (see the module). Runs on the
    event loop's thread only."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = connection_cap() if cap is None else cap
        #: Open connections in the order they were made (uvicorn protocol -> state).
        self.open: dict[Any, _Conn] = {}
        #: Accepted connections that have sent nothing yet, oldest first (socket -> state):
        #: a uvicorn protocol is built only once a byte arrives, so a flood of silent
        #: connections costs an accept and a reader each (:meth:`GuardedServer.serve_connection`).
        self.silent: dict[socket.socket, _Silent] = {}
        #: Stops watching a silent socket (the event loop's ``remove_reader``).
        self.unwatch: Any = None
        self.closed = _Closed()

    def __len__(self) -> int:
        return len(self.open) + len(self.silent)

    # ------------------------------------------------------------------ silent connections
    def hold(self, conn: socket.socket, on_lost: Any = None) -> bool:
        """Count ``conn`` (accepted, silent so far) until :meth:`release` or its closing;
        False when it was closed at once (the cap, every other connection busy)."""
        self.silent[conn] = _Silent(time.monotonic(), on_lost)
        if len(self) > self.cap:
            self._make_room(conn)
        return conn in self.silent

    def release(self, conn: socket.socket) -> _Silent | None:
        """``conn`` sent its first bytes: no longer silent (its state), or None if closed."""
        return self.silent.pop(conn, None)

    def drop_silent(self, conn: socket.socket) -> None:
        state = self.silent.pop(conn)
        if self.unwatch is not None:
            with contextlib.suppress(Exception):
                self.unwatch(conn.fileno())
        with contextlib.suppress(OSError):
            conn.close()
        if state.on_lost is not None:
            state.on_lost()

    # ------------------------------------------------------------------ protocol hooks
    def wrap(self, protocol: Any, on_lost: Any = None, since: float | None = None) -> Any:
        """``protocol`` (uvicorn's, for one connection) tracked from ``connection_made`` to
        ``connection_lost`` (``on_lost()`` called after uvicorn's own); ``since``: when the
        connection was accepted (its head clock; default: when it is made)."""
        made, lost, received = (
            protocol.connection_made,
            protocol.connection_lost,
            protocol.data_received,
        )

        def connection_made(transport: asyncio.BaseTransport) -> None:
            made(transport)
            now = time.monotonic()
            self.open[protocol] = _Conn(now if since is None else since, now)
            if len(self) > self.cap:
                self._make_room(protocol)

        def data_received(data: bytes) -> None:
            state = self.open.get(protocol)
            if state is not None:
                state.last_data = time.monotonic()
            received(data)

        def connection_lost(exc: Exception | None) -> None:
            self.open.pop(protocol, None)
            try:
                lost(exc)
            finally:
                if on_lost is not None:
                    on_lost()

        protocol.connection_made = connection_made
        protocol.data_received = data_received
        protocol.connection_lost = connection_lost
        return protocol

    def _make_room(self, new: Any) -> None:
        """Over the cap: close the oldest silent connection, else the oldest with no request
        in flight, else ``new``."""
        for conn in self.silent:
            if conn is not new:
                self.closed.evicted += 1
                self.drop_silent(conn)
                return
        for protocol, state in self.open.items():
            if protocol is not new and not self._busy(protocol, state, time.monotonic()):
                self.closed.evicted += 1
                _close(protocol)
                return
        self.closed.refused += 1
        if new in self.silent:
            self.drop_silent(new)
        else:
            _close(new)

    # ------------------------------------------------------------------ the sweep
    @staticmethod
    def _busy(protocol: Any, state: _Conn, now: float) -> bool:
        """Whether ``protocol`` has a request in flight (its head arrived, its response is not
        complete); a request that began or ended since the last look restarts the head clock."""
        cycle = getattr(protocol, "cycle", None)
        if cycle is not state.cycle:  # a new request head arrived
            state.cycle, state.waiting_since = cycle, now
        busy = cycle is not None and not getattr(cycle, "response_complete", True)
        if state.busy and not busy:  # its response ended: the next head's clock starts
            state.waiting_since = now
        state.busy = busy
        return busy

    def sweep(self, now: float | None = None) -> None:
        """Close the connections past their head or body timeout; log what was closed."""
        now = time.monotonic() if now is None else now
        for conn, silent in list(self.silent.items()):
            if now - silent.since > HEAD_TIMEOUT_S:
                self.closed.head += 1
                self.drop_silent(conn)
        for protocol, state in list(self.open.items()):
            if self._busy(protocol, state, now):
                cycle = protocol.cycle
                if getattr(cycle, "more_body", False) and now - state.last_data > BODY_IDLE_S:
                    self.closed.body += 1
                    _close(protocol)
            elif now - state.waiting_since > HEAD_TIMEOUT_S:
                self.closed.head += 1
                _close(protocol)
        self._log(now)

    def _log(self, now: float) -> None:
        c = self.closed
        if now - c.logged_at < LOG_EVERY_S or not (c.head or c.body or c.evicted or c.refused):
            return
        log.warning(
            "closed connections in the last %.0f s: %d sent no complete request head within "
            "%.0f s, %d stopped sending a body for %.0f s, %d idle ones closed and %d new ones "
            "refused at the cap of %d open connections (docs/server.md, 'Limits')",
            now - c.logged_at,
            c.head,
            HEAD_TIMEOUT_S,
            c.body,
            BODY_IDLE_S,
            c.evicted,
            c.refused,
            self.cap,
        )
        self.closed = _Closed(logged_at=now)

    async def run(self) -> None:
        """Sweep every :data:`SWEEP_S` until cancelled."""
        while True:
            await asyncio.sleep(SWEEP_S)
            self.sweep()


def _close(protocol: Any) -> None:
    transport = getattr(protocol, "transport", None)
    if transport is not None and not transport.is_closing():
        transport.close()


class GuardedServer(uvicorn.Server):
    """uvicorn with :class:`Guard`'s limits on every connection it serves. It accepts on the
    sockets given to :meth:`startup` itself, :data:`ACCEPT_BATCH` at a time (asyncio's own
    accept loop takes up to the whole backlog in one go, so a flood's newest connections
    pushed a client's connection out at the cap before its request was even read); a full
    descriptor table pauses accepting for :data:`ACCEPT_PAUSE_S`, logged."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(configure(config))
        self.guard = Guard()
        self._sweeper: asyncio.Task[None] | None = None
        self._listening: list[socket.socket] = []
        self._accept_failed = 0
        self._accept_logged = 0.0

    def protocol(self, on_lost: Any = None, since: float | None = None) -> asyncio.Protocol:
        """uvicorn's protocol for one connection, as its own ``startup`` builds it, under the
        guard (``on_lost()`` once the connection is gone; ``since``: when it was accepted)."""
        made: Any = self.config.http_protocol_class(  # type: ignore[call-arg]
            config=self.config, server_state=self.server_state, app_state=self.lifespan.state
        )
        return self.guard.wrap(made, on_lost, since)  # type: ignore[no-any-return]

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # the lifespan; uvicorn listens on nothing itself
        if self.should_exit:
            return
        loop = asyncio.get_running_loop()
        self.guard.unwatch = loop.remove_reader
        self._listening = list(sockets or [])
        for sock in self._listening:
            sock.listen(BACKLOG)
            sock.setblocking(False)
            loop.add_reader(sock.fileno(), self._accept, loop, sock)
        self._sweeper = loop.create_task(self.guard.run())

    def _accept(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._out_of_descriptors(exc)
                    loop.remove_reader(sock.fileno())
                    loop.call_later(ACCEPT_PAUSE_S, self._resume, loop, sock)
                    return
                continue  # ECONNABORTED and the like: that client is gone
            conn.setblocking(False)
            self.serve_connection(loop, conn)

    def _resume(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        if not self.should_exit and sock.fileno() >= 0:
            loop.add_reader(sock.fileno(), self._accept, loop, sock)

    def _out_of_descriptors(self, exc: OSError) -> None:
        self._accept_failed += 1
        now = time.monotonic()
        if now - self._accept_logged >= LOG_EVERY_S:
            log.warning(
                "accepting failed %d times (%s): paused %.2f s each time, still serving",
                self._accept_failed,
                exc,
                ACCEPT_PAUSE_S,
            )
            self._accept_failed, self._accept_logged = 0, now

    def serve_connection(
        self, loop: asyncio.AbstractEventLoop, conn: socket.socket, on_lost: Any = None
    ) -> None:
        """Serve ``conn`` (accepted, non-blocking) as uvicorn serves a connection it accepted,
        once its first bytes arrive (until then it is a silent one of the guard: no protocol
        built); ``on_lost()`` once it is gone (also when it is refused: stopping, the cap, the
        head timeout, or the client left before its connection was set up)."""
        if self.should_exit:  # stopping: a connection accepted meanwhile is refused
            conn.close()
            if on_lost is not None:
                on_lost()
            return
        try:  # a client's request is often there already: no silent stage for it
            sent = conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            sent = None
        except OSError:
            sent = b""  # reset: the protocol sees it and closes
        if sent is not None:
            loop.create_task(self._connect(loop, conn, on_lost, time.monotonic()))
        elif self.guard.hold(conn, on_lost):
            loop.add_reader(conn.fileno(), self._first_bytes, loop, conn)

    def _first_bytes(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
        loop.remove_reader(conn.fileno())
        silent = self.guard.release(conn)
        if silent is not None:
            loop.create_task(self._connect(loop, conn, silent.on_lost, silent.since))

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, conn: socket.socket, on_lost: Any, since: float
    ) -> None:
        made: list[asyncio.Protocol] = []

        def protocol() -> asyncio.Protocol:
            made.append(self.protocol(on_lost, since))
            return made[0]

        try:
            await loop.connect_accepted_socket(protocol, conn)
        except OSError as exc:
            log.debug("a connection failed before it was set up: %s", exc)
            with contextlib.suppress(OSError):
                conn.close()
            if not made and on_lost is not None:  # else the protocol's connection_lost calls it
                on_lost()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        for sock in self._listening:  # take no more connections, then uvicorn's stop
            with contextlib.suppress(Exception):
                loop.remove_reader(sock.fileno())
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for conn in list(self.guard.silent):  # no request begun: closed at once
            self.guard.drop_silent(conn)
        await super().shutdown(sockets)
