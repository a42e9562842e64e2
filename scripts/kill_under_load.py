"""32 clients of a real ``memlane serve`` (SQLite, hash embedder) doing a mixed load (adds,
searches, lists, injects); the server is killed with SIGKILL in the middle, started again, and
every write it acknowledged (200) is looked up: acknowledged writes lost must be 0 (issue #24).
A bad-input client runs alongside (lone surrogates, huge ints, malformed JSON): 500s are counted.

Run from the repository root: ``.venv/bin/python scripts/kill_under_load.py [--clients 32]
[--seconds 20]``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(home: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env.update(MEMLANE_HOME=str(home), MEMLANE_EMBEDDING__PROVIDER="hash")
    env["PYTHONPATH"] = str(ROOT / "src")
    log = (home / "serve.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlane", "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("memlane serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="memlane-kill-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start(home, port)
    acked: dict[str, str] = {}  # id -> owner
    statuses: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def client(n: int) -> None:
        owner = f"owner{n % 4}"
        with httpx.Client(base_url=url, timeout=30) as http:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    if i % 3 == 0:
                        r = http.post("/v1/search", json={"query": f"note {n}", "owner": owner})
                    elif i % 7 == 0:
                        r = http.post(
                            "/v1/inject",
                            json={
                                "session": f"s{n}",
                                "text": f"what about note {n}?",
                                "owner": owner,
                            },
                        )
                    elif i % 5 == 0:
                        r = http.get("/v1/memories", params={"owner": owner})
                    else:
                        text = f"client {n} note {i} at {time.time_ns()}"
                        r = http.post(
                            "/v1/memories", json={"owner": owner, "memory": {"content": text}}
                        )
                        if r.status_code == 200:
                            with lock:
                                for res in r.json()["results"]:
                                    acked[res["memory"]["id"]] = owner
                    with lock:
                        statuses[str(r.status_code)] += 1
                except httpx.TransportError as exc:
                    with lock:
                        statuses[type(exc).__name__] += 1
                    time.sleep(0.05)

    bad = [
        b'{"memory": {"content": "\\ud800"}}',
        b'{"memory": ',
        b'{"memories": [null]}',
        b"[" * 20000,
    ]

    def hostile() -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            while not stop.is_set():
                for body in bad:
                    try:
                        r = http.post(
                            "/v1/memories",
                            content=body,
                            headers={"Content-Type": "application/json"},
                        )
                        with lock:
                            statuses[f"bad:{r.status_code}"] += 1
                    except httpx.TransportError as exc:
                        with lock:
                            statuses[f"bad:{type(exc).__name__}"] += 1
                        time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
    threads.append(threading.Thread(target=hostile))
    for t in threads:
        t.start()
    time.sleep(args.seconds / 2)
    with lock:
        acked_before_kill = len(acked)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = time.monotonic()
    proc = start(home, port)
    restarted_s = time.monotonic() - killed_at
    time.sleep(args.seconds / 2)
    stop.set()
    for t in threads:
        t.join()
    found: set[str] = set()
    with httpx.Client(base_url=url, timeout=60) as http:
        for owner in sorted(set(acked.values())):
            for status in ("active", "forgotten", "superseded"):
                cursor = None
                while True:
                    params = {"owner": owner, "status": status, "limit": 1000}
                    if cursor:
                        params["cursor"] = cursor
                    page = http.get("/v1/memories", params=params).json()
                    found |= {m["id"] for m in page["items"]}
                    cursor = page["next_cursor"]
                    if not cursor:
                        break
    proc.terminate()
    proc.wait()
    lost = sorted(set(acked) - found)
    print(
        json.dumps(
            {
                "clients": args.clients,
                "seconds": args.seconds,
                "acknowledged_writes": len(acked),
                "acknowledged_before_kill": acked_before_kill,
                "acknowledged_writes_lost": len(lost),
                "restart_s": round(restarted_s, 2),
                "answers": dict(statuses.most_common()),
                "server_errors_500": sum(v for k, v in statuses.items() if k.endswith("500")),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
