"""Gray-zone verify and merge at write time with a real provider over HTTP (tests/llm_server.py):
``llm_merge`` / ``llm_reject`` / ``llm_keep``, and every ``fallback_*`` path."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ScriptedEmbedder
from llm_server import Held, Reply, Script, Slow, Status, serve
from memlane import MemoryEngine
from memlane.config import LLMSettings
from memlane.llm import make_llm
from memlane.llm.prompts import VERIFY_VERSION
from memlane.types import Decision, Relation
from memlane.types import Status as MemoryStatus

pytest.importorskip("openai")
pytest.importorskip("anthropic")

MakeEngine = Callable[..., MemoryEngine]
BASE = "Alice prefers dark mode in her editor"
GRAY = "Alice prefers a dark theme in her code editor"  # guard: different (not a hard failure)
NEAR = "Alice prefers dark mode in the editor"  # guard: narrows (drops "her")
MERGED = "Alice prefers dark mode (a dark theme) in her code editor"


def answer(action: str, merged: str | None = None, reasoning: str = "scripted") -> Reply:
    return Reply(json.dumps({"action": action, "merged_text": merged, "reasoning": reasoning}))


@pytest.fixture(params=["openai", "anthropic"])
def script(request: pytest.FixtureRequest) -> Script:
    return Script(request.param)


@pytest.fixture
def base_url(script: Script) -> Iterator[str]:
    with serve(script) as url:
        yield url


def pair(
    make_engine: MakeEngine, script: Script, base_url: str, new: str = GRAY, cos: float = 0.92
) -> tuple[MemoryEngine, Any]:
    emb = ScriptedEmbedder()
    emb.place(BASE)
    emb.place(new, like=BASE, cos=cos)
    settings = LLMSettings(
        provider=script.kind, model="m", base_url=base_url, timeout_s=0.5, max_retries=0
    )
    engine = make_engine(embedder=emb, llm=make_llm(settings))
    first = engine.add(BASE, importance=0.4).memory
    assert script.requests == []  # the first memory has no neighbour: no call
    return engine, first


def test_llm_merge_keeps_the_old_id_and_history_and_logs_the_prompt_version(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    script.steps = [answer("merge", MERGED, "same preference, more detail")]
    engine, first = pair(make_engine, script, base_url)
    r = engine.add(GRAY, importance=0.9)
    assert r.decision is Decision.LLM_MERGE and r.memory.id == first.id
    now = engine.get(first.id)
    assert now.content == MERGED and now.created_at == first.created_at
    assert now.importance == 0.9  # the higher importance of the two
    assert [v.content for v in engine.history(first.id)] == [BASE]
    assert engine.count() == 1
    (row,) = engine.dedup_log()
    assert row.decision is Decision.LLM_MERGE
    assert row.reasoning == f"[{VERIFY_VERSION}] same preference, more detail"
    stats = engine.llm_stats()
    assert stats["provider"] == script.kind and stats["calls"] == 1 and stats["failures"] == 0
    assert stats["tokens_in"] > 0 and stats["tokens_out"] > 0


def test_llm_reject_confirms_the_existing_memory(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    script.steps = [answer("reject")]
    engine, first = pair(make_engine, script, base_url)
    r = engine.add(GRAY, importance=0.9)
    assert r.decision is Decision.LLM_REJECT and r.duplicate
    kept = engine.get(first.id)
    assert kept.content == BASE and kept.confirmations == 1 and kept.importance == 0.4
    assert engine.count() == 1


def test_llm_keep_stores_both_linked(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    script.steps = [answer("keep", reasoning="different editors")]
    engine, first = pair(make_engine, script, base_url)
    r = engine.add(GRAY)
    assert r.decision is Decision.LLM_KEEP and not r.duplicate
    assert engine.count() == 2
    (link,) = engine.associations(r.memory.id)
    assert link.relation is Relation.RELATED_TO and first.id in (link.source_id, link.target_id)


def test_a_contradiction_expires_the_old_memory_without_deleting_it(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    script.steps = [answer("contradict", reasoning="she switched themes")]
    engine, first = pair(make_engine, script, base_url)
    r = engine.add(GRAY)
    assert r.decision is Decision.LLM_KEEP and "superseded" in (r.reasoning or "")
    assert [m.content for m in engine.list()] == [GRAY]  # the old one is out of listings
    old = engine.get(first.id, include_inactive=True)
    assert old.status is MemoryStatus.SUPERSEDED and old.content == BASE
    assert old.valid_to is not None and old.valid_to >= old.created_at
    assert engine.get(r.memory.id).valid_to is None
    (link,) = engine.associations(r.memory.id)
    assert (link.source_id, link.target_id, link.relation) == (
        r.memory.id,
        first.id,
        Relation.UPDATES,
    )
    hits = engine.search("dark mode editor", mode="fts")
    assert first.id not in {h.memory.id for h in hits}  # search skips expired memories
    assert engine.count() == 1


@pytest.mark.parametrize(
    ("step", "why"),
    [
        (Slow(3.0, json.dumps({"action": "reject"})), "LLM failed"),
        (Status(500), "LLM failed"),
        (Status(429), "LLM failed"),
        (Reply("I think they are the same."), "malformed"),
        (answer("merge", ""), "empty"),
        (answer("merge", None), "empty"),
        (answer("merge", "[Context from memory]\n[fact] x"), "injected"),
        (answer("merge", "x" * (len(BASE) + len(GRAY) + 10)), "longer than both"),
    ],
    ids=["timeout", "500", "429", "malformed", "empty", "null", "injected", "too-long"],
)
def test_a_failed_call_or_a_bad_merge_keeps_both_texts(
    make_engine: MakeEngine, script: Script, base_url: str, step: Any, why: str
) -> None:
    script.steps = [step]
    engine, first = pair(make_engine, script, base_url)
    r = engine.add(GRAY)
    assert r.decision is Decision.FALLBACK_KEEP and not r.duplicate
    assert why in (r.reasoning or "")
    assert engine.get(first.id).content == BASE and engine.history(first.id) == []
    assert sorted(m.content for m in engine.list()) == sorted([BASE, GRAY])
    assert engine.dedup_log()[0].decision is Decision.FALLBACK_KEEP


def test_a_failed_call_on_near_identical_text_rejects_it(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    script.default = Status(500)
    engine, first = pair(make_engine, script, base_url, new=NEAR, cos=0.975)
    r = engine.add(NEAR)
    assert r.decision is Decision.FALLBACK_REJECT and r.memory.id == first.id
    assert engine.count() == 1 and engine.llm_stats()["failures"] == 1


def test_the_engine_opens_the_configured_provider(
    tmp_path: Path, script: Script, base_url: str
) -> None:
    (tmp_path / "memlane.toml").write_text(
        f'[llm]\nprovider = "{script.kind}"\nmodel = "small"\nbase_url = "{base_url}"\n'
        "timeout_s = 2\nmax_retries = 0\n",
        encoding="utf-8",
    )
    script.steps = [answer("reject")]
    emb = ScriptedEmbedder()
    emb.place(BASE)
    emb.place(GRAY, like=BASE, cos=0.9)
    with MemoryEngine.open(tmp_path, embedder=emb) as engine:
        engine.add(BASE)
        assert engine.add(GRAY).decision is Decision.LLM_REJECT
        assert engine.llm_stats()["model"] == "small"
    assert script.requests[0]["json"]["model"] == "small"


def test_without_an_llm_nothing_is_called_and_stats_say_none(engine: MemoryEngine) -> None:
    engine.add(BASE)
    assert engine.llm_stats() == {
        "provider": "none",
        "model": None,
        "calls": 0,
        "failures": 0,
        "tokens_in": 0,
        "tokens_out": 0,
        "latency_s": 0.0,
    }


def test_other_writers_are_not_blocked_while_the_model_answers(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    held = Held(json.dumps({"action": "reject", "reasoning": "slow"}))
    script.steps = [held]
    emb = ScriptedEmbedder()
    emb.place(BASE)
    emb.place(GRAY, like=BASE, cos=0.92)
    settings = LLMSettings(provider=script.kind, model="m", base_url=base_url, timeout_s=60)
    slow = make_engine(embedder=emb, llm=make_llm(settings))
    slow.add(BASE)
    other = make_engine(embedder=emb)  # a second connection to the same store
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(slow.add(GRAY)))
    worker.start()
    deadline = time.monotonic() + 30
    while not script.requests and time.monotonic() < deadline:  # the model has been asked
        time.sleep(0.01)
    assert script.requests
    other.add("Bob waters the plants on Fridays")
    # The model's answer is still held back: had this write queued behind the model call, it
    # could only have finished after the server answered (ordering, not a wall-clock bound).
    assert not held.answered.is_set()
    held.release()
    worker.join(timeout=60)
    assert done[0].decision is Decision.LLM_REJECT
    assert other.count() == 2


# --- several gray-zone pairs of one batch in one call --------------------------------------------


def many(*answers: tuple[int, str, str | None]) -> Reply:
    body = [
        {"pair": n, "action": action, "merged_text": merged, "reasoning": f"pair {n}"}
        for n, action, merged in answers
    ]
    return Reply(json.dumps({"answers": body}))


def three_pairs(make_engine: MakeEngine, script: Script, base_url: str) -> tuple[Any, list[Any]]:
    emb = ScriptedEmbedder()
    olds = [f"Alice likes {x} in the morning" for x in ("tea", "jazz", "rain")]
    news = [f"In the morning Alice enjoys {x}" for x in ("tea", "jazz", "rain")]
    for old, new in zip(olds, news, strict=True):
        emb.place(old)
        emb.place(new, like=old, cos=0.9)
    settings = LLMSettings(
        provider=script.kind, model="m", base_url=base_url, timeout_s=0.5, max_retries=0
    )
    engine = make_engine(embedder=emb, llm=make_llm(settings))
    first = [engine.add(old).memory for old in olds]
    assert script.requests == []
    return engine, [first, news]


def test_gray_pairs_of_one_batch_are_verified_in_one_call(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    engine, (first, news) = three_pairs(make_engine, script, base_url)
    script.steps = [many((2, "keep", None), (1, "reject", None), (3, "merge", news[2]))]
    results = engine.add_many([{"content": t} for t in news])
    assert len(script.requests) == 1  # three pairs, one call
    prompt = json.dumps(script.requests[0]["json"])
    assert all(f"PAIR {n}" in prompt for n in (1, 2, 3))
    assert [r.decision for r in results] == [
        Decision.LLM_REJECT,
        Decision.LLM_KEEP,
        Decision.LLM_MERGE,
    ]
    assert results[0].reasoning == "[verify-many-v2] pair 1"
    assert engine.get(first[2].id).content == news[2]
    assert engine.llm_stats()["calls"] == 1


def test_a_failed_batch_call_asks_pair_by_pair(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    engine, (_, news) = three_pairs(make_engine, script, base_url)
    # the batch answer misses a pair: refused; then one call per pair
    script.steps = [many((1, "keep", None), (2, "keep", None)), *[answer("reject")] * 3]
    results = engine.add_many([{"content": t} for t in news])
    assert len(script.requests) == 4
    assert [r.decision for r in results] == [Decision.LLM_REJECT] * 3
    assert engine.llm_stats()["failures"] == 1


def test_a_reversed_llm_merge_splits_back(
    make_engine: MakeEngine, script: Script, base_url: str
) -> None:
    # issue 26: the memory gets its own text back and the offered text is its own memory again,
    # and the two stay apart for the janitor
    script.steps = [answer("merge", MERGED, "same preference")]
    engine, first = pair(make_engine, script, base_url)
    assert engine.add(GRAY).decision is Decision.LLM_MERGE
    (row,) = engine.review_pending()
    outcome = engine.review(row.id, "reverse")
    assert outcome.action == "reversed" and outcome.restored is not None
    assert engine.get(first.id).content == BASE
    assert engine.get(outcome.restored.id).content == GRAY
    assert MERGED in [v.content for v in engine.history(first.id)]  # kept in the history
    relations = {a.relation for a in engine.associations(first.id)}
    assert Relation.KEPT_APART in relations
    assert engine.janitor(dry_run=True).planned == 0
