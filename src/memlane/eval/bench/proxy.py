"""``memlane bench proxy``: what the memory proxy adds to a request, against the same fake upstream
called directly, in one run (docs/proxy.md "Speed").

Each round sends the same chat-completions request (a conversation growing turn by turn, a new
conversation every ``turns`` turns) twice, directly to the fake upstream and through the proxy,
in alternating order, over keep-alive httpx clients, after :data:`WARM_UP` requests not
counted; non-streaming: the whole request's wall time; streaming: the time to the first byte of
the answer (time to first token). The added time is the per-round difference (proxy minus
direct), so both sides meet the same machine load. Beside them, the in-process injection's own
p50/p95 (:meth:`MemoryEngine.turn` on a question of the same shape, in a session of its own,
the same turn position): the floor of what the proxy can add, timed in every round right after
its two requests (and warmed up with them), so that it too meets the machine's load of that
moment; and, for comparison, the same floor timed back to back before the proxy starts
(``inject_back_to_back_ms``: warm caches, no other work between, lower than the proxy's
conditions; this bench's floor until 2026-11-28).
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

from memlane.engine import MemoryEngine

SUBJECTS = ["Alice", "Bob", "Carol", "Dmitri", "Emeka", "Farah", "Goro", "Hana", "Ivan", "Jia"]
THINGS = [
    ("is allergic to", ["peanuts", "shellfish", "pollen", "penicillin", "cats"]),
    ("drinks", ["green tea", "espresso", "oat milk lattes", "sparkling water", "rooibos"]),
    ("works on", ["the billing service", "the search index", "the iOS app", "the data lake"]),
    ("lives in", ["Berlin", "Lagos", "Osaka", "Lima", "Toronto"]),
    ("plays", ["chess", "the cello", "badminton", "go", "the drums"]),
]


#: The memory step's time in the proxy's log line of each request (memlane.proxy.app).
MEMORY_MS = re.compile(r"memory_ms=([0-9.]+)")

#: Requests sent through both paths before measuring (not counted): the proxy's first turns
#: load its search caches and warm the model's first inferences.
WARM_UP = 12


def corpus() -> list[str]:
    """Memories for the bench: every subject with every kind of fact, and two favourites (70)."""
    return [
        f"{who} {verb} {things[(i + j) % len(things)]}"
        for i, who in enumerate(SUBJECTS)
        for j, (verb, things) in enumerate(THINGS)
    ] + [
        f"{who}'s favourite {kind} is {things[i % len(things)]}"
        for i, who in enumerate(SUBJECTS)
        for kind, things in (("drink", THINGS[1][1]), ("city", THINGS[3][1]))
    ]


def questions(n: int, tag: str) -> list[str]:
    """``n`` questions about the memories, each naming ``tag`` (every mode asks its own: a
    question asked again in its conversation would be a repeat, answered without a search)."""
    out = []
    for i in range(n):
        who = SUBJECTS[i % len(SUBJECTS)]
        verb, _ = THINGS[(i // len(SUBJECTS)) % len(THINGS)]
        out.append(f"What do you remember about what {who} {verb}? {tag} round {i}.")
    return out


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 2), "p95": round(p95, 2)}


def run(
    engine: MemoryEngine, home: Path, requests: int = 100, turns: int = 6, delay_ms: float = 0.0
) -> dict[str, Any]:
    """Measure (see the module docstring) with ``engine`` on ``home``: the fake upstream and
    ``memlane proxy --home home`` each run in a process of their own (in one process their
    event loops and this client would share one GIL: ~40 ms a request on a loaded machine).
    ``delay_ms``: the fake's pause between SSE events. Returns the figures in milliseconds."""
    for text in corpus():
        engine.add(text)
    inject_ms: list[float] = []

    def floor(session: str, question: str, position: int) -> float:
        """The in-process injection of one turn, in milliseconds."""
        started = time.perf_counter()
        engine.turn(session, question, kept=False, position=position)
        return (time.perf_counter() - started) * 1000.0

    back_to_back = [
        floor(f"floor-burst-{i // turns}", question, i % turns + 1)
        for i, question in enumerate(questions(requests, "floor burst"))
    ]
    up_port, proxy_port = _free_port(), _free_port()
    up_url, proxy_url = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{proxy_port}"
    env = dict(os.environ)
    env["MEMLANE_PROXY__UPSTREAMS"] = json.dumps(
        {"bench": {"url": up_url + "/v1", "api": "openai"}}
    )
    upstream_cmd = [sys.executable, "-m", "memlane.eval.bench.proxy_upstream", str(up_port),
                    str(delay_ms)]  # fmt: skip
    proxy_cmd = [sys.executable, "-m", "memlane", "proxy", "--home", str(home),
                 "--port", str(proxy_port)]  # fmt: skip
    with (
        _process(upstream_cmd, env, up_url + "/v1/models"),
        _process(proxy_cmd, env, proxy_url + "/health") as proxy_log,
        httpx.Client(timeout=60) as client,
    ):
        direct_url = up_url + "/v1/chat/completions"
        via_url = proxy_url + "/bench/v1/chat/completions"
        for i, question in enumerate(questions(WARM_UP, "warm-up")):  # caches, model, sockets
            body: dict[str, Any] = {
                "model": "bench",
                "messages": [{"role": "user", "content": question}],
            }
            for url in (direct_url, via_url):
                _timed(client, url, {**body, "stream": bool(i % 2)}, bool(i % 2))
            floor("floor-warm-up", question, i + 1)
        figures = {}
        for stream in (False, True):
            direct, via, added = [], [], []
            history: list[dict[str, str]] = []
            mode = "sse" if stream else "json"
            asked = questions(requests, "floor " + mode)
            for i, question in enumerate(questions(requests, mode)):
                if i % turns == 0:
                    history = []
                history.append({"role": "user", "content": question})
                body = {"model": "bench", "messages": history, "stream": stream}
                pair = {}
                for which in (0, 1) if i % 2 == 0 else (1, 0):
                    pair[which] = _timed(client, via_url if which else direct_url, body, stream)
                direct.append(pair[0])
                via.append(pair[1])
                added.append(pair[1] - pair[0])
                inject_ms.append(floor(f"floor-{mode}-{i // turns}", asked[i], i % turns + 1))
                history.append({"role": "assistant", "content": f"reply {i}"})
            figures["stream" if stream else "json"] = {
                "direct_ms": _ms(direct), "proxy_ms": _ms(via), "added_ms": _ms(added)
            }  # fmt: skip
        # the proxy's own log: the time its memory step took in each request (memory_ms)
        proxy_log.seek(0)
        inside = [float(v) for v in MEMORY_MS.findall(proxy_log.read().decode(errors="replace"))]
        inside = inside[WARM_UP:]
        figures["json"]["memory_step_ms"] = _ms(inside[:requests])
        figures["stream"]["memory_step_ms"] = _ms(inside[requests : 2 * requests])
    return {
        "bench": "proxy",
        "requests": requests,
        "turns_per_conversation": turns,
        "memories": engine.count(),
        "embedder": engine.model_name,
        "inject_ms": _ms(inject_ms),
        "inject_back_to_back_ms": _ms(back_to_back),
        "non_streaming": figures["json"],
        "streaming_first_byte": figures["stream"],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _process(cmd: list[str], env: dict[str, str], ready: str) -> Iterator[IO[bytes]]:
    """Run ``cmd`` until the block ends; enter once ``ready`` answers 200 (at most 120 s);
    yields the file its stderr goes to."""
    # a file, not a pipe: a pipe nobody reads would fill and block the process
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    log.seek(0)
                    error = log.read().decode(errors="replace")
                    raise RuntimeError(f"{' '.join(cmd[1:4])} exited: {error[-2000:]}")
                try:
                    if httpx.get(ready, timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            else:
                raise RuntimeError(f"{ready} did not answer within 120 s")
            yield log
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _timed(client: httpx.Client, url: str, body: dict[str, Any], stream: bool) -> float:
    """Milliseconds to the whole answer (``stream=False``) or to its first byte."""
    started = time.perf_counter()
    if not stream:
        resp = client.post(url, json=body)
        resp.raise_for_status()
        return (time.perf_counter() - started) * 1000.0
    with client.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        first = None
        for _ in resp.iter_raw():
            first = first if first is not None else (time.perf_counter() - started) * 1000.0
    assert first is not None
    return first
