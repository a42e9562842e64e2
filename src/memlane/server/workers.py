"""``memlane serve --workers N``: N processes serving one port.

Why: one process runs Python one thread at a time (the GIL). Under 8 concurrent clients one
``memlane serve`` process used 1.08 of a 2-core machine's cores (its CPU time over the wall time
of a level of the ``bench serve`` load; 10,000 memories, load ~4.5): the engine's Python
(search, selection, SQL calls) is the most of a call, and only the model's and SQLite's C code
runs beside it. Worker processes use every core.

How:

- The parent (the process ``memlane serve`` started as) holds the home's lock and binds the
  socket, as with one process; it opens the store once (creating or migrating it before any
  worker opens it), then starts the workers and loads nothing itself. Each worker is a fresh
  interpreter (multiprocessing's ``spawn``: nothing forked from a process with threads) that
  opens its own engine (its own store connection, search caches and model) and loads the model.
- Once every worker has loaded, the parent writes ``<home>/run/server.json`` with its own pid
  (the hooks find the server there and stop it by that pid, as they do a one-process server),
  then tells the workers to serve: no worker answers before the record exists, as with one
  process. The parent accepts the connections and hands each to the worker with the fewest
  open (:mod:`memlane.server.dispatch`); a keep-alive connection stays with its worker. Each
  worker's model runs on its share of the cores
  (:func:`~memlane.embeddings.local.threads_per_process`).
- The store is the source of truth: each worker's vector and BM25 caches catch up through the
  store's change feed before every search (:mod:`memlane.store.index_cache`), so a write one
  worker acknowledged is found by the next search on any other. ``memlane.toml``: every worker
  looks at the file's stamp before each request (:class:`memlane.server.app.FreshSettings`),
  so a change saved through one worker is used by the next request on any other.
- Stopping: SIGTERM or ^C to the parent; it asks every worker to stop through its pipe, each
  finishes its requests in flight (up to :data:`~memlane.server.lifecycle.GRACE_S` s) and closes
  its engine, then the parent removes the record. A worker whose parent is gone (killed) sees
  its pipe close and stops the same way. A worker that dies while serving is started again.
- ``--idle-shutdown``: the workers count their requests in one shared
  :class:`~memlane.server.lifecycle.Activity`; the parent stops them all when it is idle.

Memory: each worker holds its own search caches and model (docs/server.md gives the resident
memory per worker measured).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnContext, SpawnProcess
from pathlib import Path
from types import FrameType
from typing import Any

from memlane.server import dispatch, lifecycle
from memlane.server.record import RecordKeeper

log = logging.getLogger("memlane.server")

#: Seconds a worker may take to open its engine and load the model before the start fails.
START_LIMIT_S = 300.0
#: Seconds between two looks of the parent at its workers (dead ones, idleness, signals).
LOOK_S = 0.5
#: What the parent sends a loaded worker to start serving (anything else: stop).
SERVE = "serve"


class WorkerFailed(Exception):
    """A worker ended before it served (the message says which and its exit code)."""


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to build its engine and app (pickled to the worker).

    ``overrides``: settings given on the command line that every load keeps (the daemon's
    token), as :class:`~memlane.server.state.ServerState` takes them."""

    home: Path
    overrides: Mapping[str, Any] = field(default_factory=dict)
    daemon: bool = False
    #: onnxruntime threads of the worker's local model (None: the embedder's default);
    #: :class:`Workers` sets each worker's share of the cores.
    embed_threads: int | None = None


def _ignore(sig: int, frame: FrameType | None) -> None:
    """Handler of SIGINT in a worker: ^C reaches every process of the terminal's group, and
    only the parent decides (it asks the workers to stop, once)."""


def worker_main(
    spec: WorkerSpec,
    chan: socket.socket,
    slot: int,
    pipe: Connection,
    activity: lifecycle.Activity,
    loads: dispatch.Loads,
) -> None:
    """A worker process: its engine, the model loaded, uvicorn serving the connections the
    parent hands over ``chan`` (counted in ``loads[slot]``) until the parent says stop (or its
    end of ``pipe`` closes); the engine closed after the last request."""
    import uvicorn

    from memlane.config import Settings
    from memlane.engine import MemoryEngine
    from memlane.server.app import create_app
    from memlane.server.state import ServerState

    signal.signal(signal.SIGINT, _ignore)
    lifecycle.log_to_stderr()
    if spec.embed_threads is not None:
        from memlane.embeddings import local

        local.use_threads(spec.embed_threads)
    settings = Settings.load(spec.home, **dict(spec.overrides))
    engine = MemoryEngine.open(spec.home, settings)
    try:
        engine.embed(["warm up"])  # ready only once the model answers
        state = ServerState(engine, overrides=spec.overrides)
        state.start_watching()
        config = uvicorn.Config(
            lifecycle.IdleTracker(create_app(state), activity),
            log_level="warning" if spec.daemon else "info",
        )
        config.timeout_graceful_shutdown = lifecycle.GRACE_S
        server = dispatch.HandedServer(config, chan, loads, slot)
        # Loaded: the parent writes the record once every worker is, then says serve (no
        # worker answers before the record exists, as with one process).
        pipe.send(("loaded", os.getpid()))
        try:
            if pipe.recv() != SERVE:
                return
        except (EOFError, OSError):  # the parent is gone
            return
        threading.Thread(
            target=_until_told, args=(server, pipe), name="memlane-worker-pipe", daemon=True
        ).start()
        # uvicorn raises a caught SIGTERM again once it has stopped: without a handler of
        # ours that would end the process before the engine is closed below.
        previous = signal.signal(signal.SIGTERM, _ignore)
        try:
            server.run()
        finally:
            signal.signal(signal.SIGTERM, previous)
            state.stop_watching()
    finally:
        engine.close()


def _until_told(server: Any, pipe: Connection) -> None:
    """Stop uvicorn when the parent says so or its end of the pipe closes (it is gone)."""
    with contextlib.suppress(EOFError, OSError):
        pipe.recv()
    server.should_exit = True


@dataclass
class _Worker:
    process: SpawnProcess
    pipe: Connection
    #: The parent's end of the pair the connections are handed over.
    chan: socket.socket
    slot: int
    serving: bool = False


class Workers:
    """The parent's side: ``count`` workers of ``spec`` serving the connections accepted on
    ``sock`` (:mod:`memlane.server.dispatch`)."""

    def __init__(self, spec: WorkerSpec, sock: socket.socket, count: int) -> None:
        import multiprocessing

        from memlane.embeddings.local import threads_per_process

        if spec.embed_threads is None:
            spec = dataclasses.replace(spec, embed_threads=threads_per_process(count))
        self.spec = spec
        self.sock = sock
        self.count = count
        self.ctx: SpawnContext = multiprocessing.get_context("spawn")
        self.activity = lifecycle.Activity(self.ctx)
        self.loads = dispatch.Loads(self.ctx, count)
        self.workers: list[_Worker] = []
        self.stopping = threading.Event()
        self.dispatcher = dispatch.Dispatcher(sock, self.loads, self.targets)

    def start_one(self, slot: int) -> _Worker:
        mine, theirs = self.ctx.Pipe()
        chan, their_chan = dispatch.channel()
        self.loads.reset(slot)
        process = self.ctx.Process(
            target=worker_main,
            args=(self.spec, their_chan, slot, theirs, self.activity, self.loads),
            name="memlane-serve-worker",
        )
        process.start()
        theirs.close()  # the worker's end lives in the worker: it sees EOF when we are gone
        their_chan.close()
        return _Worker(process, mine, chan, slot)

    def targets(self) -> dict[int, socket.socket]:
        """The workers serving now, by slot, with the end their connections are sent on."""
        return {w.slot: w.chan for w in list(self.workers) if w.serving}

    def wait_ready(self, worker: _Worker, limit_s: float = START_LIMIT_S) -> None:
        """Return once ``worker`` has loaded its engine and model (it serves once told
        :data:`SERVE`), or the parent is asked to stop. Raises :class:`WorkerFailed` when it
        ends first or takes over ``limit_s``."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and not self.stopping.is_set():
            if wait([worker.pipe, worker.process.sentinel], timeout=LOOK_S):
                try:
                    worker.pipe.recv()
                    return
                except (EOFError, OSError):
                    worker.process.join(5)
                    raise WorkerFailed(
                        f"worker pid {worker.process.pid} ended while starting "
                        f"(exit code {worker.process.exitcode}); its error is above"
                    ) from None
        if not self.stopping.is_set():
            raise WorkerFailed(
                f"worker pid {worker.process.pid} did not start within {limit_s:.0f} s"
            )

    def start(self) -> None:
        """Start every worker and wait until each has loaded (they load the model at once)."""
        self.workers = [self.start_one(slot) for slot in range(self.count)]
        for worker in self.workers:
            self.wait_ready(worker)

    def serve(self, worker: _Worker | None = None) -> None:
        """Tell ``worker`` (default: every one) to serve."""
        for w in [worker] if worker else self.workers:
            with contextlib.suppress(OSError):  # it died meanwhile: replaced later
                w.pipe.send(SERVE)
                w.serving = True

    def replace_dead(self) -> None:
        """Start a worker again in place of one that ended while serving."""
        for i, worker in enumerate(self.workers):
            if worker.process.is_alive() or self.stopping.is_set():
                continue
            log.warning(
                "worker pid %s ended (exit code %s): starting another",
                worker.process.pid,
                worker.process.exitcode,
            )
            worker.serving = False
            worker.pipe.close()
            worker.chan.close()
            self.workers[i] = self.start_one(worker.slot)
            self.wait_ready(self.workers[i])
            self.serve(self.workers[i])

    def stop(self) -> None:
        """Ask every worker to stop, wait for them (their requests in flight finish), kill
        those still there after the grace time."""
        self.dispatcher.stop()
        for worker in self.workers:
            with contextlib.suppress(OSError):  # a worker gone already
                worker.pipe.send("stop")  # anything but SERVE: before serving, stop too
        deadline = time.monotonic() + lifecycle.GRACE_S + 10
        for worker in self.workers:
            worker.process.join(max(0.1, deadline - time.monotonic()))
            if worker.process.is_alive():
                log.warning("worker pid %s did not stop: killed", worker.process.pid)
                worker.process.kill()
                worker.process.join(5)
            worker.pipe.close()
            worker.chan.close()

    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers if w.process.pid is not None]


def serve(
    spec: WorkerSpec,
    count: int,
    *,
    sock: socket.socket,
    token: str,
    store_id: str,
    idle_shutdown_s: float,
    announce: Any = None,
) -> None:
    """Serve with ``count`` workers until SIGTERM/^C (or ``idle_shutdown_s`` without a request,
    when above 0), with the record in ``spec.home`` once they all serve; ``announce(record,
    pids)`` is called then. Raises :class:`WorkerFailed` when a worker cannot start."""
    workers = Workers(spec, sock, count)

    def stop_signal(sig: int, frame: FrameType | None) -> None:
        workers.stopping.set()

    previous = {sig: signal.signal(sig, stop_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    watcher = keeper = None
    try:
        workers.start()
        if workers.stopping.is_set():  # SIGTERM or ^C while the workers were starting
            return
        record = lifecycle.record_of(
            sock,
            home=spec.home,
            token=token,
            store_id=store_id,
            daemon=spec.daemon,
            idle_shutdown_s=idle_shutdown_s,
            workers=count,
        )
        keeper = RecordKeeper(spec.home, record, spec.overrides)
        keeper.start()
        workers.serve()
        workers.dispatcher.start()
        if announce is not None:
            announce(record, workers.pids())
        if idle_shutdown_s > 0:
            watcher = lifecycle.watch_idle(workers.activity, idle_shutdown_s, workers.stopping.set)
        while not workers.stopping.wait(LOOK_S):
            workers.replace_dead()
    finally:
        if watcher is not None:
            watcher.set()
        workers.stopping.set()
        workers.stop()
        if keeper is not None:
            keeper.stop()
        for sig, old in previous.items():
            signal.signal(sig, old)
