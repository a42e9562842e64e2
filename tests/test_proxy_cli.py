"""``memlane proxy`` as a user runs it (a real process, the ``openai`` SDK through it to a fake
upstream), its refusals at start, and ``memlane bench proxy``'s figures (one short run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import openai
import pytest

from conftest import Backend
from memlane.eval.bench.proxy import _free_port, _process
from proxy_support import OPENAI_KEY, facts_in, fake_upstream
from test_turn import FACTS, QUESTIONS


@pytest.fixture
def env(sqlite_backend: Backend) -> Iterator[dict[str, str]]:
    engine = sqlite_backend.engine()
    for fact in FACTS:
        engine.add(fact)
    yield sqlite_backend.child_env()


def test_memlane_proxy_serves_an_sdk_with_memory(env: dict[str, str]) -> None:
    with fake_upstream() as (fake, url):
        port = _free_port()
        upstreams = {"main": {"url": url + "/v1", "api": "openai"}}
        env = {**env, "MEMLANE_PROXY__UPSTREAMS": json.dumps(upstreams)}
        cmd = [sys.executable, "-m", "memlane", "proxy", "--port", str(port)]
        with _process(cmd, env, f"http://127.0.0.1:{port}/health"):
            client = openai.OpenAI(
                base_url=f"http://127.0.0.1:{port}/main/v1", api_key=OPENAI_KEY, max_retries=0
            )
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": QUESTIONS[0]}]
            )
            client.close()
        assert reply.choices[0].message.content == "reply 1"
        assert any("peanuts" in f for f in facts_in(fake.seen[0]))
        assert fake.seen[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"


@pytest.mark.parametrize(
    ("args", "extra", "says"),
    [
        ([], {}, "no upstream configured"),
        (["--host", "0.0.0.0"], {"MEMLANE_PROXY__UPSTREAMS": json.dumps(
            {"a": {"url": "http://127.0.0.1:9/v1", "api": "openai"}})}, "needs a token"),
        ([], {"MEMLANE_PROXY__UPSTREAMS": json.dumps(
            {"Bad Name": {"url": "http://x/v1", "api": "openai"}})}, "upstream name"),
    ],
)  # fmt: skip
def test_memlane_proxy_refuses_to_start_without_a_safe_config(
    env: dict[str, str], args: list[str], extra: dict[str, str], says: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memlane", "proxy", *args],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and says in done.stderr, done.stderr


def test_bench_proxy_prints_its_figures(env: dict[str, str], tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memlane", "bench", "proxy", "--requests", "10", "--json"],
        env={**env, "MEMLANE_HOME": os.fspath(tmp_path)},  # type: ignore[arg-type]
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["bench"] == "proxy" and result["requests"] == 10
    for part in ("non_streaming", "streaming_first_byte"):
        for side in ("direct_ms", "proxy_ms", "added_ms"):
            assert set(result[part][side]) == {"p50", "p95"}
        assert result[part]["proxy_ms"]["p50"] > 0
    assert result["inject_ms"]["p95"] > 0 and result["inject_back_to_back_ms"]["p95"] > 0
