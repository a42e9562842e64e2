"""``memlane serve --workers N``: the parent accepts the connections and hands each to the worker
that holds the fewest open connections.

Why not let the workers accept from the shared socket, as before: a worker woken by a new
connection accepts every connection waiting (asyncio's accept loop takes up to the backlog at
once), so a burst of keep-alive clients lands on one worker. Measured under ``bench serve``'s
8 clients with 2 workers (100,000 memories): one worker embedded 319 queries while the other
embedded 44; the busy one was held by its GIL while the other idled. Handing each connection to
the least busy worker spreads 8 clients 4 and 4.

How: the parent's :class:`Dispatcher` thread accepts on the listening socket and sends the
accepted descriptor (``SCM_RIGHTS``, :func:`socket.send_fds`) over a Unix datagram socket pair
to the worker with the fewest open connections (:class:`Loads`, in shared memory: the parent
counts a connection when it hands it over, the worker uncounts it when it closes). The worker's
uvicorn listens on nothing (:class:`HandedServer`); its event loop reads the descriptors from
its end of the pair and serves each connection as uvicorn serves one it accepted itself
(:meth:`asyncio.loop.connect_accepted_socket` with uvicorn's protocol). A keep-alive connection
stays with its worker, as before. The parent closes its copy of the descriptor once sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from multiprocessing.context import BaseContext
from typing import Any

import uvicorn

log = logging.getLogger("memlane.server")

#: Seconds between two looks of the accepting thread at its stop flag.
LOOK_S = 0.5


class Loads:
    """Open connections per worker slot, in shared memory (``ctx``: the workers' context)."""

    def __init__(self, ctx: BaseContext, count: int) -> None:
        self._counts = ctx.Array("i", count)
        self._n = count

    def add(self, slot: int, delta: int) -> None:
        with self._counts.get_lock():
            self._counts[slot] += delta

    def reset(self, slot: int) -> None:
        """A new worker in ``slot`` (the one before it died: its connections died with it)."""
        with self._counts.get_lock():
            self._counts[slot] = 0

    def least(self, slots: Sequence[int], after: int) -> int:
        """The slot of ``slots`` with the fewest connections; of equals, the first after
        ``after`` (round robin between equally busy workers)."""
        with self._counts.get_lock():
            counts = {s: self._counts[s] for s in slots}
        return min(slots, key=lambda s: (counts[s], (s - after - 1) % self._n))


def channel() -> tuple[socket.socket, socket.socket]:
    """The parent's end and the worker's end of the pair the descriptors travel on."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    theirs.set_inheritable(True)
    return mine, theirs


class Dispatcher:
    """The parent's accepting thread: each connection on ``sock`` goes to the least busy of
    the workers ``targets()`` names (``{slot: channel}``, the workers that serve now)."""

    def __init__(
        self,
        sock: socket.socket,
        loads: Loads,
        targets: Callable[[], dict[int, socket.socket]],
    ) -> None:
        self.sock = sock
        self.loads = loads
        self.targets = targets
        self._stop = threading.Event()
        self._last = -1
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="memlane-accept", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting (connections not accepted yet wait in the socket's backlog)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(LOOK_S * 4)

    def _run(self) -> None:
        self.sock.settimeout(LOOK_S)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError as exc:  # closed under us (stopping), or out of descriptors
                if self._stop.is_set():
                    return
                log.warning("accepting a connection failed: %s", exc)
                self._stop.wait(0.05)
                continue
            with conn:
                self.hand(conn)

    def hand(self, conn: socket.socket) -> bool:
        """Send ``conn`` to the least busy serving worker (another one when that one is gone);
        False when none took it (the connection is then closed by the caller)."""
        targets = self.targets()
        while targets:
            slot = self.loads.least(list(targets), self._last)
            self.loads.add(slot, 1)
            try:
                socket.send_fds(targets[slot], [b"c"], [conn.fileno()])
            except OSError:  # that worker is gone: it is replaced; try the others
                self.loads.add(slot, -1)
                del targets[slot]
                continue
            self._last = slot
            return True
        log.warning("no worker to serve a connection: closed")
        return False


class HandedServer(uvicorn.Server):
    """uvicorn serving the connections that arrive on ``chan`` (it listens on no socket);
    each one counted in ``loads[slot]`` until it closes."""

    def __init__(
        self, config: uvicorn.Config, chan: socket.socket, loads: Loads, slot: int
    ) -> None:
        super().__init__(config)
        self.chan = chan
        self.loads = loads
        self.slot = slot

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # the lifespan; no listening socket
        if self.should_exit:
            return
        loop = asyncio.get_running_loop()
        self.chan.setblocking(False)
        loop.add_reader(self.chan.fileno(), self._take, loop)

    def _protocol(self) -> asyncio.Protocol:
        """uvicorn's protocol for one connection, as its own ``startup`` builds it, uncounted
        from :attr:`loads` when the connection closes."""
        protocol: Any = self.config.http_protocol_class(  # type: ignore[call-arg]
            config=self.config, server_state=self.server_state, app_state=self.lifespan.state
        )
        lost = protocol.connection_lost

        def connection_lost(exc: Exception | None) -> None:
            try:
                lost(exc)
            finally:
                self.loads.add(self.slot, -1)

        protocol.connection_lost = connection_lost
        return protocol  # type: ignore[no-any-return]

    def _take(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            _, fds, _, _ = socket.recv_fds(self.chan, 1, 1)
        except BlockingIOError:
            return
        except OSError:
            fds = []
        if not fds:  # the parent's end is closed: it is gone (its pipe stops this worker)
            loop.remove_reader(self.chan.fileno())
            return
        conn = socket.socket(fileno=fds[0])
        conn.setblocking(False)
        loop.create_task(self._serve_one(loop, conn))

    async def _serve_one(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
        if self.should_exit:  # stopping: a connection handed over meanwhile is refused
            conn.close()
            self.loads.add(self.slot, -1)
            return
        made: list[asyncio.Protocol] = []

        def protocol() -> asyncio.Protocol:
            made.append(self._protocol())
            return made[0]

        try:
            await loop.connect_accepted_socket(protocol, conn)
        except OSError as exc:  # the client left before its connection was set up
            log.debug("a handed connection failed: %s", exc)
            with contextlib.suppress(OSError):
                conn.close()
            if not made:  # else the protocol's connection_lost uncounts it
                self.loads.add(self.slot, -1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        with contextlib.suppress(Exception):  # take no more connections, then uvicorn's stop
            asyncio.get_running_loop().remove_reader(self.chan.fileno())
        await super().shutdown(sockets)
