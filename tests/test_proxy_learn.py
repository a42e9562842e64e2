"""``[proxy] learn``: the proxy's conversations feed ``engine.learn`` on a background thread,
without memlane's blocks, never delaying the answer; off by default."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import Backend
from memlane import MemoryEngine
from memlane.eval.bench.proxy_upstream import Upstream
from memlane.llm import ExtractedMemory, LLMVerdict
from proxy_support import fake_upstream, proxy_for
from test_turn import FACTS, QUESTIONS


class SlowLearner:
    """An LLM at the boundary: records each transcript, answers one memory, after ``delay_s``."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.transcripts: list[str] = []
        self.done = threading.Event()

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict:
        raise RuntimeError("not asked in this test")

    def extract_memories(self, transcript: str) -> list[ExtractedMemory]:
        time.sleep(self.delay_s)
        self.transcripts.append(transcript)
        self.done.set()
        return [ExtractedMemory("Dana's cat is called Miso", "fact", 0.6)]


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Upstream, str]]:
    with fake_upstream() as pair:
        yield pair


def chat(url: str, messages: list[Any]) -> float:
    started = time.monotonic()
    resp = httpx.post(
        url + "/openai/v1/chat/completions", json={"model": "m", "messages": messages}
    )
    assert resp.status_code == 200
    return time.monotonic() - started


def test_learning_runs_in_the_background_from_the_clients_conversation(
    sqlite_backend: Backend, upstream: tuple[Upstream, str]
) -> None:
    learner = SlowLearner(delay_s=1.5)
    engine: MemoryEngine = sqlite_backend.engine(llm=learner)
    for fact in FACTS:
        engine.add(fact)
    with proxy_for(engine, upstream[1], learn=True) as (url, _):
        messages = [
            {"role": "user", "content": QUESTIONS[0]},
            {"role": "assistant", "content": "Better not: my cat Miso agrees."},
            {"role": "user", "content": "I'm Dana, by the way."},
        ]
        took = chat(url, messages)
        assert took < 1.5  # the answer did not wait for the model's extraction
        assert learner.done.wait(20)
    assert (
        "Dana" in learner.transcripts[0] and "[Context from memory]" not in learner.transcripts[0]
    )
    assert any("Miso" in m.content for m in engine.list(limit=100))


def test_learning_is_off_by_default(
    sqlite_backend: Backend, upstream: tuple[Upstream, str]
) -> None:
    learner = SlowLearner(delay_s=0.0)
    engine = sqlite_backend.engine(llm=learner)
    with proxy_for(engine, upstream[1]) as (url, _):
        chat(url, [{"role": "user", "content": "I'm Dana, my cat is Miso."}])
    assert learner.transcripts == []
