"""``memlane bench serve``: the HTTP server under load, against the same calls in-process.

A copy of a bench store (N memories) is served by the real ``memlane serve`` in a subprocess on a
free loopback port; 1, 8 and 32 clients (threads, one keep-alive connection each) send a mix of
70% inject, 20% search and 10% add. Reported per level: throughput, p50/p95/p99 per call kind,
errors, and the CPU time the server's processes used (``server_cpu_ms_per_call``, and
``server_cores``: that time over the level's wall time, e.g. ~1 for one process held by the
GIL; with workers, ``worker_cpu_shares``: each worker's part of that time). The same kind of
calls run in-process first (one caller) for the comparison; at the end every acknowledged write
is read back over the API (``lost_writes`` counts those missing), and the resident memory of
each server process is read (``server_rss_mib``, Linux ``/proc``).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.eval.bench.generator import Generator
from memlane.eval.bench.store import OWNER, PreparedStore
from memlane.eval.timing import percentile

#: The mix of calls: kind -> share.
MIX = (("inject", 0.7), ("search", 0.2), ("add", 0.1))


@dataclass(frozen=True, slots=True)
class Call:
    kind: str
    text: str
    session: str = ""
    recent: tuple[str, ...] = ()


def plan(generator: Generator, stored: int, n: int, *, start: int, tag: str) -> list[Call]:
    """``n`` calls in the 70/20/10 mix; adds take memories ``start..`` of the stream (never
    stored before), injects spread over 8 sessions named after ``tag``."""
    rng = random.Random(f"{generator.seed}:{tag}")
    turns = generator.conversation(n, stored, salt=f"serve-{tag}")
    queries = generator.queries(n, stored, salt=f"serve-search-{tag}")
    fresh = generator.memories(n, start)
    calls = []
    for i in range(n):
        roll = rng.random()
        if roll < MIX[0][1]:
            t = turns[i]
            calls.append(Call("inject", t.text, f"{tag}:{t.session}", t.recent))
        elif roll < MIX[0][1] + MIX[1][1]:
            calls.append(Call("search", queries[i].text))
        else:
            calls.append(Call("add", fresh[i].content))
    return calls


def _summary(samples: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    every = [ms for values in samples.values() for ms in values]
    for kind, values in [("all", every), *sorted(samples.items())]:
        out[kind] = {
            "calls": len(values),
            "p50_ms": round(percentile(values, 50), 3),
            "p95_ms": round(percentile(values, 95), 3),
            "p99_ms": round(percentile(values, 99), 3),
        }
    return out


def in_process(home: Path, calls: Sequence[Call], warmup: Sequence[Call]) -> dict[str, Any]:
    """The calls on an engine in this process, one after the other."""
    from memlane.engine import MemoryEngine

    samples: dict[str, list[float]] = defaultdict(list)
    with MemoryEngine.open(home) as engine:
        do = _engine_call(engine)
        for call in warmup:
            do(call)
        started = time.perf_counter()
        for call in calls:
            t0 = time.perf_counter()
            do(call)
            samples[call.kind].append((time.perf_counter() - t0) * 1000)
        seconds = time.perf_counter() - started
    return {
        "clients": 1,
        "seconds": round(seconds, 3),
        "ops_per_s": round(len(calls) / seconds, 1),
        "errors": 0,
        **_summary(samples),
    }


def _engine_call(engine: Any) -> Callable[[Call], Any]:
    def do(call: Call) -> Any:
        if call.kind == "inject":
            return engine.inject(call.session, call.text, owner=OWNER, recent=list(call.recent))
        if call.kind == "search":
            return engine.search(call.text, owner=OWNER)
        return engine.add(call.text, owner=OWNER, source="bench-serve")

    return do


def over_http(url: str, calls: Sequence[Call], clients: int) -> tuple[dict[str, Any], list[str]]:
    """The calls split over ``clients`` threads; returns the level's report and the ids of the
    memories each acknowledged add returned."""
    import httpx

    samples: dict[str, list[float]] = defaultdict(list)
    acknowledged: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client(part: Sequence[Call]) -> None:
        mine: dict[str, list[float]] = defaultdict(list)
        ids: list[str] = []
        bad: list[str] = []
        with httpx.Client(base_url=url, timeout=120) as http:
            barrier.wait()
            for call in part:
                t0 = time.perf_counter()
                try:
                    resp = _http_call(http, call)
                except httpx.HTTPError as exc:
                    bad.append(f"{call.kind}: {type(exc).__name__}")
                    continue
                mine[call.kind].append((time.perf_counter() - t0) * 1000)
                if resp.status_code != 200:
                    bad.append(f"{call.kind}: HTTP {resp.status_code}")
                elif call.kind == "add":
                    ids.append(resp.json()["results"][0]["memory"]["id"])
        with lock:
            for kind, values in mine.items():
                samples[kind].extend(values)
            acknowledged.extend(ids)
            errors.extend(bad)

    threads = [
        threading.Thread(target=client, args=(calls[i::clients],), daemon=True)
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    report = {
        "clients": clients,
        "seconds": round(seconds, 3),
        "ops_per_s": round(len(calls) / seconds, 1),
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:5],
        **_summary(samples),
    }
    return report, acknowledged


def _http_call(http: Any, call: Call) -> Any:
    if call.kind == "inject":
        body = {
            "session": call.session,
            "text": call.text,
            "owner": OWNER,
            "recent": list(call.recent),
        }
        return http.post("/v1/inject", json=body)
    if call.kind == "search":
        return http.post("/v1/search", json={"query": call.text, "owner": OWNER})
    memory = {"content": call.text, "source": "bench-serve"}
    return http.post("/v1/memories", json={"owner": OWNER, "memory": memory})


def _tree(pid: int) -> list[int]:
    """``pid`` and its live children (a server's workers, multiprocessing's resource tracker),
    from Linux ``/proc`` (empty elsewhere)."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [pid, *map(int, kids)]


def _is_worker(pid: int) -> bool:
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _cpu_s(pids: Sequence[int]) -> float | None:
    """User + system CPU seconds of ``pids`` so far (``None`` without ``/proc``)."""
    ticks = 0
    try:
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    except (OSError, IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError):
        pass
    return None


def _with_cpu(
    report: dict[str, Any],
    pids: Sequence[int],
    before: float | None,
    workers_before: Sequence[float | None] = (),
    workers: Sequence[int] = (),
) -> None:
    after = _cpu_s(pids)
    if before is None or after is None or not report["seconds"]:
        return
    used = after - before
    report["server_cpu_ms_per_call"] = round(1000 * used / max(1, report["all"]["calls"]), 2)
    report["server_cores"] = round(used / report["seconds"], 2)
    shares = []
    for pid, start in zip(workers, workers_before, strict=True):
        end = _cpu_s([pid])
        if start is None or end is None or used <= 0:
            return
        shares.append(round((end - start) / used, 3))
    if shares:  # how evenly the workers shared the load (e.g. [0.5, 0.5]; [0.9, 0.1]: one did)
        report["worker_cpu_shares"] = shares


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_serve(
    prepared: PreparedStore,
    *,
    seed: int = 0,
    calls: int = 400,
    clients: Sequence[int] = (1, 8, 32),
    warmup: int = 20,
    workers: int | None = None,
) -> dict[str, Any]:
    """The load benchmark (module docstring) on a copy of ``prepared``'s store; ``workers``:
    ``memlane serve --workers`` (None: the server's default)."""
    import httpx

    generator = Generator(seed)
    n = prepared.build.memories
    work = Path(tempfile.mkdtemp(prefix="memlane-bench-serve-"))
    home = work / "home"
    shutil.copytree(prepared.home, home, ignore=shutil.ignore_patterns(".bench.lock"))
    try:
        offset = n + 1000
        tag = f"s{os.getpid()}"
        warm = plan(generator, n, warmup, start=offset, tag=f"{tag}-warm")
        offset += warmup
        local_calls = plan(generator, n, calls, start=offset, tag=f"{tag}-local")
        offset += calls
        local = in_process(home, local_calls, warm[: warmup // 2])
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        # The server's log goes to a file: a pipe nobody reads would fill and block the server.
        log = (work / "serve.log").open("w")
        command = [sys.executable, "-m", "memlane", "serve", "--home", str(home)]
        command += ["--port", str(port)]
        if workers is not None:
            command += ["--workers", str(workers)]
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _wait_ready(proc, url, home)
            pids = _tree(proc.pid)
            served_by = sum(map(_is_worker, pids)) or 1
            levels = []
            acknowledged: list[str] = []
            # Not reported: connections, caches; concurrent, so that every worker gets some.
            rest = warm[warmup // 2 :]
            if rest:
                over_http(url, rest, max(1, min(len(rest), max(clients, default=1))))
            for count in clients:
                level_calls = plan(generator, n, calls, start=offset, tag=f"{tag}-c{count}")
                offset += calls
                before = _cpu_s(pids)
                worker_pids = [pid for pid in pids if _is_worker(pid)]
                workers_before = [_cpu_s([pid]) for pid in worker_pids]
                report, ids = over_http(url, level_calls, count)
                _with_cpu(report, pids, before, workers_before, worker_pids)
                levels.append(report)
                acknowledged.extend(ids)
            with httpx.Client(base_url=url, timeout=60) as http:
                lost = sum(
                    1
                    for mid in acknowledged
                    if http.get(f"/v1/memories/{mid}", params={"owner": OWNER}).status_code != 200
                )
            # with workers the parent loads no model and holds no search cache
            rss = {
                "parent": _rss_mib(proc.pid),
                "workers": [_rss_mib(pid) for pid in pids if _is_worker(pid)],
            }
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    one = levels[0] if levels and levels[0]["clients"] == 1 else None
    gap = round(one["inject"]["p95_ms"] - local["inject"]["p95_ms"], 3) if one else None
    return {
        "bench": "serve",
        "memories": n,
        "seed": seed,
        "embedder": prepared.embedder.name,
        "calls_per_level": calls,
        "workers": served_by,
        "mix": dict(MIX),
        "in_process": local,
        "levels": levels,
        "inject_p95_gap_ms_at_1_client": gap,
        "acknowledged_writes": len(acknowledged),
        "lost_writes": lost,
        "server_rss_mib": rss,
    }


def _wait_ready(
    proc: subprocess.Popen[str], url: str, home: Path | None = None, limit_s: float = 600
) -> None:
    """Until ``/health`` answers and (``home`` given) the server's record is written: with
    workers, every one of them serves by then."""
    import httpx

    from memlane.hooks.daemon import read_record

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"memlane serve exited with {proc.returncode} at start")
        try:
            record = read_record(home)[0] if home is not None else {}
            if record is not None and httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"memlane serve was not ready within {limit_s:.0f} s")
