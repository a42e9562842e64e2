"""Readers never wait for writers (docs/errors.md): while another process holds SQLite's write
lock, a ``POST /v1/memories`` of ``memlane serve`` waits for it, and the ``GET`` routes of the
same server answer meanwhile (issue #24: they took 18 s, the blocked write's wait)."""

from __future__ import annotations

import sqlite3
import threading
import time

import httpx
import pytest

from conftest import Backend
from server_support import run_server

#: How long the test lets the blocked write wait at most: far above any read's time, so a read
#: that waited for the writer is caught without timing the reads tightly.
HOLD_S = 20.0


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_reads_answer_while_a_write_waits_for_another_process(store_backend: Backend) -> None:
    with run_server(store_backend) as served:
        url = served.url
        first = httpx.post(
            f"{url}/v1/memories", json={"memory": {"content": "the deploy runs at noon"}}
        )
        assert first.status_code == 200, first.text
        holder = sqlite3.connect(store_backend.home / "memlane.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        write: dict[str, object] = {}

        def blocked_write() -> None:
            started = time.monotonic()
            r = httpx.post(
                f"{url}/v1/memories",
                json={"memory": {"content": "the backup runs at midnight"}},
                timeout=HOLD_S + 60,
            )
            write.update(status=r.status_code, seconds=time.monotonic() - started)

        thread = threading.Thread(target=blocked_write)
        thread.start()
        try:
            time.sleep(0.5)  # the write is now waiting for the lock
            times: dict[str, float] = {}
            with httpx.Client(base_url=url, timeout=HOLD_S) as client:
                for path in ("/v1/stats", "/v1/memories", "/v1/dedup-log", "/health"):
                    started = time.monotonic()
                    r = client.get(path)
                    times[path] = time.monotonic() - started
                    assert r.status_code == 200, (path, r.text)
                search = client.post("/v1/search", json={"query": "deploy"})
                assert search.status_code == 200
                assert [h["memory"]["content"] for h in search.json()["hits"]] == [
                    "the deploy runs at noon"
                ]
            # Every read answered while the write was still waiting: none waited for it.
            assert thread.is_alive(), "the write did not wait for the lock"
            print("reads during a blocked write (s):", {k: round(v, 3) for k, v in times.items()})
            assert max(times.values()) < HOLD_S / 4
        finally:
            holder.execute("COMMIT")
            holder.close()
            thread.join(timeout=HOLD_S + 60)
        assert write["status"] == 200  # once the lock was free the write went through
        listed = httpx.get(f"{url}/v1/memories").json()["items"]
        assert {m["content"] for m in listed} == {
            "the deploy runs at noon",
            "the backup runs at midnight",
        }
