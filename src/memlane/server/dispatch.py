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

Under a flood (issue #33: 2,100 half-open connections at a 1,024 descriptor limit stopped
``--workers 2`` for good): the accepting thread never blocks on a worker. Sends are
non-blocking; a connection no worker can take now waits in the parent's queue of at most
:data:`MAX_WAITING` (beyond it the oldest that has sent nothing is closed, else the oldest) and is sent as soon as a worker's channel
has room (the kernel queues a few datagrams per channel). A worker that receives a connection
without its descriptor (``MSG_CTRUNC``: it had no descriptor free) counts it closed, logs it
and keeps reading its channel; the parent's going is seen on the worker's pipe, never on the
channel. Each worker keeps its connections under its descriptor limit and closes silent and
slow ones (:mod:`memlane.server.limits`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.context import BaseContext

import uvicorn

from memlane.server.limits import GuardedServer

log = logging.getLogger("memlane.server")

#: Seconds between two looks of the accepting thread at its stop flag.
LOOK_S = 0.5
#: Seconds between two tries to send the waiting connections while no worker has room.
RETRY_S = 0.005
#: Connections accepted that wait for a worker's channel to have room (the oldest is closed
#: beyond this many: a worker that cannot keep up is not given more than it can hold).
MAX_WAITING = 256
#: Connections one accepting pass takes before it hands them over.
ACCEPT_BATCH = 64
#: Datagrams a worker reads from its channel in one wake-up.
TAKE_BATCH = 64
#: Seconds between two log lines of the same kind of trouble (accept failures, drops).
LOG_EVERY_S = 10.0
#: Send errors that mean the worker's end is gone (else: no room now, try later).
_GONE = {errno.EPIPE, errno.ECONNREFUSED, errno.ENOTCONN, errno.EBADF, errno.ECONNRESET}


class _Every:
    """Counts an event and logs it at most every :data:`LOG_EVERY_S` seconds."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.count = 0
        self.at = 0.0

    def __call__(self, detail: object = "") -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.at >= LOG_EVERY_S:
            log.warning(self.message, self.count, detail)
            self.count, self.at = 0, now


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
        #: Accepted connections no worker had room for yet, oldest first.
        self.waiting: collections.deque[socket.socket] = collections.deque()
        self._accept_failed = _Every("accepting failed %d times (last: %s); still accepting")
        self._dropped = _Every(
            "closed %d connections no worker could take (%s); the workers are saturated"
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="memlane-accept", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting (connections not accepted yet wait in the socket's backlog)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(LOOK_S * 4)

    def _run(self) -> None:
        self.sock.setblocking(False)
        with selectors.DefaultSelector() as selector:
            selector.register(self.sock, selectors.EVENT_READ)
            try:
                while not self._stop.is_set():
                    ready = selector.select(RETRY_S if self.waiting else LOOK_S)
                    if ready and not self._accept():
                        self._stop.wait(0.05)  # out of descriptors: let some close first
                    self._send_waiting()
            except OSError as exc:  # closed under us (stopping)
                if not self._stop.is_set():
                    log.error("the accepting thread stopped: %s", exc)
            finally:
                while self.waiting:
                    self.waiting.popleft().close()

    def _accept(self) -> bool:
        """Accept what is waiting (up to :data:`ACCEPT_BATCH`) into :attr:`waiting`; False
        when accepting failed (out of descriptors)."""
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._accept_failed(exc)
                    return False
                raise
            self.waiting.append(conn)
            if len(self.waiting) > MAX_WAITING:
                self._drop_one()
        return True

    def _drop_one(self) -> None:
        """The queue is full: close the oldest connection that has sent nothing yet (a
        client's request is usually there by now), else the oldest."""
        victim = self.waiting[0]
        for conn in self.waiting:
            try:
                conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                victim = conn
                break
            except OSError:
                victim = conn  # reset by its client already
                break
        self.waiting.remove(victim)
        victim.close()
        self._dropped("the queue of waiting connections was full")

    def _send_waiting(self) -> None:
        """Hand the waiting connections over, oldest first, until no worker has room."""
        while self.waiting:
            sent = self.hand(self.waiting[0])
            if sent is None:
                return  # no room now: tried again in RETRY_S
            self.waiting.popleft().close()  # sent (the worker holds it) or no worker at all

    def hand(self, conn: socket.socket) -> bool | None:
        """Send ``conn`` to the least busy serving worker that has room (another one when that
        one is gone or full). True: sent; None: every worker's channel is full (try later);
        False: no worker serves (the caller closes the connection, logged)."""
        targets = self.targets()
        full = False
        while targets:
            slot = self.loads.least(list(targets), self._last)
            self.loads.add(slot, 1)
            try:
                socket.send_fds(targets[slot], [b"c"], [conn.fileno()], socket.MSG_DONTWAIT)
            except OSError as exc:  # gone (it is replaced), or no room now
                self.loads.add(slot, -1)
                del targets[slot]
                full = full or exc.errno not in _GONE
                continue
            self._last = slot
            return True
        if full:
            return None
        self._dropped("no worker serves")
        return False


class HandedServer(GuardedServer):
    """uvicorn serving the connections that arrive on ``chan`` (it listens on no socket);
    each one counted in ``loads[slot]`` until it closes, under the limits of
    :mod:`memlane.server.limits`."""

    def __init__(
        self, config: uvicorn.Config, chan: socket.socket, loads: Loads, slot: int
    ) -> None:
        super().__init__(config)
        self.chan = chan
        self.loads = loads
        self.slot = slot
        self._truncated = _Every(
            "%d connections arrived without their descriptor (%s): closed, still serving"
        )

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # the lifespan and the guard; no listening socket
        if self.should_exit:
            return
        loop = asyncio.get_running_loop()
        self.chan.setblocking(False)
        loop.add_reader(self.chan.fileno(), self._take, loop)

    def _uncount(self) -> None:
        self.loads.add(self.slot, -1)

    def _take(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the connections waiting on the channel (up to :data:`TAKE_BATCH`). A datagram
        whose descriptor did not arrive (``MSG_CTRUNC``: this process had none free) is a
        connection the kernel closed: uncounted and logged; the channel is read on."""
        for _ in range(TAKE_BATCH):
            try:
                _, fds, flags, _ = socket.recv_fds(self.chan, 1, 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # not seen on Linux (a full table truncates instead)
                self._truncated(exc)
                return
            if not fds:
                self._uncount()
                self._truncated("out of descriptors" if flags & socket.MSG_CTRUNC else flags)
                continue
            for extra in fds[1:]:  # never sent; closed if it ever is
                with contextlib.suppress(OSError):
                    socket.socket(fileno=extra).close()
            conn = socket.socket(fileno=fds[0])
            conn.setblocking(False)
            self.serve_connection(loop, conn, self._uncount)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        with contextlib.suppress(Exception):  # take no more connections, then uvicorn's stop
            asyncio.get_running_loop().remove_reader(self.chan.fileno())
        await super().shutdown(sockets)
