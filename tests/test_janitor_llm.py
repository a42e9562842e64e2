"""The janitor with a real provider over HTTP (tests/llm_server.py, the official SDKs): one call
per cluster; the model's merge, its "keep", and every failure falling back to the guard rule."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llm_server import Raw, Reply, Script, Slow, Status, serve
from memlane import MemoryEngine
from memlane.config import LLMSettings
from memlane.llm import make_llm
from memlane.llm.prompts import JANITOR_VERSION
from memlane.types import Decision
from memlane.types import Status as MemoryStatus
from test_janitor import AGE_35, AGE_36, CAT, CAT_3, plant

pytest.importorskip("openai")
pytest.importorskip("anthropic")

MakeEngine = Callable[..., MemoryEngine]
DARK = "Alice prefers dark mode in her editor"
THEME = "Alice prefers a dark theme in her code editor"  # a paraphrase: the guard says different
MERGED = "Alice prefers dark mode (a dark theme) in her code editor"


def answer(action: str, members: list[int], merged: str | None, why: str = "scripted") -> Reply:
    body = {"action": action, "members": members, "merged_text": merged, "reasoning": why}
    return Reply(json.dumps(body))


@pytest.fixture(params=["openai", "anthropic"])
def script(request: pytest.FixtureRequest) -> Script:
    return Script(request.param)


@pytest.fixture
def llm_engine(make_engine: MakeEngine, script: Script) -> Iterator[MemoryEngine]:
    with serve(script) as url:
        settings = LLMSettings(
            provider=script.kind, model="m", base_url=url, timeout_s=0.5, max_retries=0
        )
        yield make_engine(llm=make_llm(settings), dedup={"gray_low": 0.7})


def test_the_model_merges_a_paraphrase_cluster(llm_engine: MemoryEngine, script: Script) -> None:
    script.steps = [answer("merge", [1, 2], MERGED, "same preference")]
    a, b = plant(llm_engine, [DARK, THEME], importance=[0.4, 0.8])
    report = llm_engine.janitor()
    assert (report.merged, report.llm_calls, report.llm_failures) == (1, 1, 0)
    survivor = llm_engine.get(a.id)
    assert survivor.content == MERGED and survivor.importance == 0.8
    assert {v.content for v in llm_engine.history(a.id)} == {DARK, THEME}
    assert llm_engine.get(b.id, include_inactive=True).status is MemoryStatus.SUPERSEDED
    rows = llm_engine.dedup_log()
    assert {(r.decision, r.new_text) for r in rows} == {
        (Decision.JANITOR_MERGE, DARK),
        (Decision.JANITOR_MERGE, THEME),
    }
    assert all(f"[{JANITOR_VERSION}] same preference" in (r.reasoning or "") for r in rows)
    prompt = json.dumps(script.requests[0]["json"])
    assert "1. " + DARK in prompt and "2. " + THEME in prompt
    assert llm_engine.llm_stats()["calls"] == 1
    hits = llm_engine.search("dark theme code editor")
    assert hits[0].memory.id == a.id  # re-embedded: the merged text is what is searched


def test_the_model_may_keep_a_cluster_apart(llm_engine: MemoryEngine, script: Script) -> None:
    script.steps = [answer("keep", [], None, "different ages")]
    plant(llm_engine, [AGE_35, AGE_36])
    report = llm_engine.janitor()
    assert report.merged == 0 and report.skipped == {"llm_keep": 1} and report.llm_calls == 1
    assert llm_engine.count() == 2
    (row,) = llm_engine.dedup_log()  # remembered, confirmed: nothing to review
    assert row.decision is Decision.LLM_KEEP and row.review_status == "confirmed"
    assert llm_engine.review_pending() == []
    again = llm_engine.janitor()  # the same members: not asked again
    assert again.llm_calls == 0 and again.skipped == {"llm_keep": 1} and len(script.requests) == 1
    plant(llm_engine, [AGE_35 + " with friends"])  # the cluster changed: asked again
    script.steps = [answer("keep", [], None, "different ages")]
    assert llm_engine.janitor().llm_calls == 1


def test_the_model_merges_only_the_members_it_names(
    llm_engine: MemoryEngine, script: Script
) -> None:
    at_work = DARK + " at work"
    script.steps = [answer("merge", [1, 3], at_work)]
    a, b, c = plant(llm_engine, [DARK, THEME, at_work])
    report = llm_engine.janitor()
    (plan,) = report.plans
    assert [m.id for m in plan.members] == [a.id, b.id, c.id]  # one cluster of three
    assert plan.outcome == "merged" and plan.survivor == a.id and plan.absorbed == [c.id]
    assert llm_engine.get(a.id).content == at_work
    assert llm_engine.get(b.id).status is MemoryStatus.ACTIVE  # not named: left alone


@pytest.mark.parametrize(
    "step",
    [
        Status(500),
        Slow(2.0, "{}"),
        Reply("not json"),
        Raw("{}"),
        answer("merge", [1, 2], ""),  # an empty merge
        answer("merge", [1, 2], "x" * 500),  # longer than both members together
        answer("merge", [1, 9], CAT_3),  # a member that is not in the list
    ],
    ids=["500", "timeout", "malformed", "raw", "empty", "too-long", "bad-member"],
)
def test_a_failed_or_refused_answer_falls_back_to_the_guard_rule(
    llm_engine: MemoryEngine, script: Script, step: Any
) -> None:
    script.steps = [step]
    script.default = Status(500)
    a, _ = plant(llm_engine, [CAT, CAT_3])
    b_age, _ = plant(llm_engine, [AGE_35, AGE_36], owner="other")
    report = llm_engine.janitor(owner="default")
    (plan,) = report.plans
    assert plan.via == "guard" and plan.outcome == "merged"
    assert "LLM" in plan.reason  # why the model was not followed
    assert llm_engine.get(a.id).content == CAT_3  # the guard rule: the newest complete text
    again = llm_engine.janitor(owner="other")  # a guard failure stays apart whatever happens
    assert again.merged == 0 and again.skipped == {"guard": 1}
    assert llm_engine.count("other") == 2
    assert llm_engine.get(b_age.id, owner="other").status is MemoryStatus.ACTIVE
