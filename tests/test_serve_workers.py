"""``memlane serve --workers N``: the real server (uvicorn, worker processes) over real HTTP.

A write acknowledged by one worker is found by a search through another (each worker's search
caches catch up through the store's change feed), a settings change saved through one is used
by the next request on another, on both backends; the home's record names the parent, which
the hooks' ``stop`` ends with its workers; a worker that dies is replaced; workers whose parent
was killed stop by themselves; ``--idle-shutdown`` counts the requests of every worker.

Which worker serves a connection: the test reads it from ``/proc`` (the process holding the
server's end of that TCP connection), so the server needs no test hook.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import Backend
from hook_support import OWNER, TEST_TIMEOUT_S, claude_payload, run_hook
from memlane.hooks.daemon import pid_alive, read_record, record_path, stop
from server_support import free_port

pytestmark = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="reads which worker holds a connection in /proc"
)

#: Seconds any bounded wait below may take (start-up under load, not a timing assertion).
WAIT_S = 120


def wait_for(check: Callable[[], Any], seconds: float = WAIT_S) -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    return None


def children(pid: int) -> set[int]:
    """Live child processes of ``pid`` that are workers (multiprocessing's helper processes,
    such as its resource tracker, hold no listening socket and are left out by the caller)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == pid and stat[0] != "Z":
            found.add(int(proc.name))
    return found


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        pass
    return inodes


def server_end(server_port: int, client_port: int) -> str | None:
    """Inode of the server's end of the loopback connection from ``client_port``."""
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        local, remote = fields[1].split(":"), fields[2].split(":")
        if int(local[1], 16) == server_port and int(remote[1], 16) == client_port:
            return fields[9]
    return None


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    home: Path
    log: Path

    def workers(self) -> set[int]:
        """Children of the parent started by multiprocessing's ``spawn`` (the workers; its
        resource tracker runs another command)."""
        found = set()
        for pid in children(self.proc.pid):
            try:
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.add(pid)
            except OSError:
                continue
        return found

    def connect(self) -> tuple[http.client.HTTPConnection, int]:
        """A keep-alive connection and the pid of the worker that accepted it."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.connect()
        client_port = conn.sock.getsockname()[1]

        def holder() -> int | None:
            inode = server_end(self.port, client_port)
            if inode is None:
                return None
            return next((p for p in self.workers() if inode in socket_inodes(p)), None)

        pid = wait_for(holder, 30)
        assert pid is not None, "no worker accepted the connection"
        return conn, pid

    def two_workers(self) -> tuple[http.client.HTTPConnection, http.client.HTTPConnection]:
        """Connections held by two different workers (the parent hands a connection to the
        worker with the fewest open: the second goes to the other one; bounded retries)."""
        first, first_pid = self.connect()
        for _ in range(200):
            conn, pid = self.connect()
            if pid != first_pid:
                return first, conn
            conn.close()
        raise AssertionError(f"every connection went to worker {first_pid}")


def call(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> Any:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    resp = conn.getresponse()
    data = resp.read()
    assert resp.status == 200, (resp.status, data[:300])
    return json.loads(data)


@contextmanager
def serve(backend: Backend, *args: str) -> Iterator[Server]:
    """``memlane serve --port P ARGS`` (hash embedder); yields once its record is written (every
    worker serves by then); killed at the end if still running."""
    port = free_port()
    log = backend.home / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memlane", "serve", "--port", str(port), *args],
            env=backend.child_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        server = Server(proc, port, backend.home, log)
        try:
            assert wait_for(lambda: proc.poll() is not None or read_record(backend.home)[0])
            assert proc.poll() is None, log.read_text()
            yield server
        finally:
            for pid in [proc.pid, *children(proc.pid)]:
                if pid_alive(pid):
                    os.kill(pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_a_write_on_one_worker_is_found_through_another(store_backend: Backend) -> None:
    store_backend.engine().close()  # the store exists (both backends), empty
    with serve(store_backend, "--workers", "2") as server:
        record, why = read_record(store_backend.home)
        assert record is not None, why
        assert record["pid"] == server.proc.pid and record["workers"] == 2
        assert record["url"] == f"http://127.0.0.1:{server.port}"
        assert len(server.workers()) == 2
        a, b = server.two_workers()
        # search first on b: its caches are built before a's write, and must catch up
        assert (
            call(b, "POST", "/v1/search", {"query": "ferry timetable", "owner": OWNER})["hits"]
            == []
        )
        added = call(a, "POST", "/v1/memories", {
            "owner": OWNER,
            "memory": {"content": "The ferry to the island leaves at 7:40 on weekdays"},
        })  # fmt: skip
        mid = added["results"][0]["memory"]["id"]
        found = call(b, "POST", "/v1/search", {"query": "ferry island weekdays", "owner": OWNER})
        assert mid in [hit["memory"]["id"] for hit in found["hits"]]
        turn = call(b, "POST", "/v1/inject", {
            "session": "s1", "text": "when does the ferry to the island leave?", "owner": OWNER,
        })  # fmt: skip
        assert mid in [item["memory"]["id"] for item in turn["items"]]
        # and the other way: b forgets it, a no longer finds it
        call(b, "DELETE", f"/v1/memories/{mid}?owner={OWNER}")
        again = call(a, "POST", "/v1/search", {"query": "ferry island weekdays", "owner": OWNER})
        assert mid not in [hit["memory"]["id"] for hit in again["hits"]]
        # a settings change saved through a is used by the next request on b
        call(a, "PUT", "/v1/settings/injection", {"max_total": 3})
        assert call(b, "GET", "/v1/settings/injection")["settings"]["max_total"] == 3
        a.close()
        b.close()
        # the hooks stop a server by the record's pid: the parent ends its workers
        workers = server.workers()
        pid, why = stop(store_backend.home, timeout_s=WAIT_S)
        assert pid == server.proc.pid, why
        assert server.proc.wait(timeout=30) == 0
        assert not any(pid_alive(w) for w in workers)
        assert not record_path(store_backend.home).exists()
        assert "stopped, store closed (2 workers)" in server.log.read_text()


def test_keep_alive_clients_are_spread_over_the_workers(store_backend: Backend) -> None:
    """Clients that connect together (a load of keep-alive clients) are spread half and half:
    before, the first worker to wake accepted every waiting connection and served them all
    while the other idled (bench serve, 8 clients: 319 queries embedded by one, 44 by the
    other). A worker whose connections closed is the one the next connections go to."""
    store_backend.engine().close()
    with serve(store_backend, "--workers", "2") as server:
        opened = [server.connect() for _ in range(8)]
        holders = [pid for _, pid in opened]
        assert sorted(holders.count(w) for w in server.workers()) == [4, 4], holders
        for conn, _ in opened:  # every connection answers, whichever worker holds it
            assert call(conn, "GET", f"/v1/memories?owner={OWNER}")["items"] == []
        first = holders[0]
        for conn, pid in opened:
            if pid == first:
                conn.close()

        # the worker sees its clients leave (connection_lost) a moment later: until it
        # has, the next connection may still go to the other worker; bounded retries
        def to_first() -> http.client.HTTPConnection | None:
            conn, pid = server.connect()
            if pid == first:
                return conn
            conn.close()
            return None

        conn = wait_for(to_first, 30)
        assert conn is not None, "the idle worker got no new connection"
        assert call(conn, "GET", f"/v1/memories?owner={OWNER}")["items"] == []
        conn.close()
        for c, pid in opened:
            if pid != first:
                c.close()


def test_a_hook_uses_a_server_with_workers(store_backend: Backend, tmp_path: Path) -> None:
    engine = store_backend.engine()
    engine.add("The deploy script lives in tools/ship.sh and needs the VPN", owner=OWNER)
    engine.close()
    with serve(store_backend, "--workers", "2"):
        env = store_backend.child_env()
        env["MEMLANE_HOOKS__OWNER"] = OWNER
        env["MEMLANE_HOOKS__TIMEOUT_S"] = TEST_TIMEOUT_S
        env["MEMLANE_HOOKS__AUTOSTART"] = "false"
        done = run_hook(env, "UserPromptSubmit", claude_payload(
            "UserPromptSubmit", "s1", tmp_path, prompt="where is the deploy script?"))  # fmt: skip
        assert "tools/ship.sh" in (done.context() or "")
        log = store_backend.home / "logs" / "hooks.log"
        assert "in-process" not in (log.read_text() if log.exists() else "")


def test_a_dead_worker_is_replaced_and_orphans_stop(store_backend: Backend) -> None:
    store_backend.engine().close()
    with serve(store_backend, "--workers", "2") as server:
        first = server.workers()
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        replaced = wait_for(lambda: len(w := server.workers()) == 2 and victim not in w and w)
        assert replaced, server.log.read_text()
        assert "ended (exit code -9): starting another" in server.log.read_text()
        conn, _ = server.connect()
        assert call(conn, "GET", f"/v1/memories?owner={OWNER}")["items"] == []
        conn.close()
        # the parent killed outright: its workers see their pipe close and stop
        server.proc.kill()
        server.proc.wait(timeout=30)
        assert wait_for(lambda: not any(pid_alive(w) for w in replaced)), "orphan workers"


def test_idle_shutdown_counts_every_worker(store_backend: Backend) -> None:
    store_backend.engine().close()
    with serve(store_backend, "--workers", "2", "--idle-shutdown", "2") as server:
        workers = server.workers()
        assert server.proc.wait(timeout=WAIT_S) == 0  # stopped by itself, no request came
        assert not any(pid_alive(w) for w in workers)
        assert not record_path(store_backend.home).exists()
