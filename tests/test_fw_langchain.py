"""memlane in a real LangChain 1.x ``create_agent`` loop (langchain + langchain-openai from
PyPI, the ``langchain`` extra) against the fake OpenAI-compatible model (tests/fw_support.py):
the requests the model receives hold each turn's memories once, on every call of the tool
loop, and the memories an earlier turn showed come back (the middleware's text is not kept).
"""

from __future__ import annotations

import asyncio
import json
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")
pytest.importorskip("langchain_openai", reason="the langchain extra is not installed")

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from conftest import Backend
from fw_fixtures import engine, model  # noqa: F401  (shared fixtures)
from fw_support import (
    DEPLOY,
    PROJECT,
    TOOL,
    TURNS,
    FakeModel,
    check_bob,
    check_remember,
    open_engine,
    open_engine_as_is,
    run_scenario,
    seed,
)
from llm_server import Reply, Script, serve
from memlane import MemoryEngine
from memlane.config import LLMSettings
from memlane.integrations import connect
from memlane.integrations.langchain import MemlaneMiddleware
from memlane.llm import make_llm
from server_support import run_server

LEARNED = {"content": "Alice deploys on Fridays", "type": "fact", "importance": 0.6}


@tool(TOOL)
def lookup(topic: str) -> str:
    """Look a topic up in the team's notes."""
    return f"notes about {topic}"


def make_agent(model: FakeModel, memory: Any, **kw: Any) -> Any:
    llm = ChatOpenAI(model="fake", base_url=model.url, api_key="test", max_retries=0)
    middleware = MemlaneMiddleware(memory, project=PROJECT, **kw)
    return create_agent(
        llm,
        tools=[lookup],
        system_prompt="You are a helpful assistant.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


async def ask_async(agent: Any, text: str) -> Any:
    return await agent.ainvoke(
        {"messages": [{"role": "user", "content": text}]},
        config={"configurable": {"thread_id": "async"}},
        context={"user_id": "alice"},
    )


def ask(agent: Any, text: str, thread: str = "t1", user: str = "alice") -> Any:
    return agent.invoke(
        {"messages": [{"role": "user", "content": text}]},
        config={"configurable": {"thread_id": thread}},
        context={"user_id": user},
    )


def test_each_model_call_of_a_turn_holds_its_memories_once(
    model: FakeModel, engine: MemoryEngine
) -> None:
    agent = make_agent(model, engine)
    run_scenario(model, lambda text: ask(agent, text))


def test_the_async_loop_gets_the_same(model: FakeModel, engine: MemoryEngine) -> None:
    agent = make_agent(model, engine)
    with asyncio.Runner() as loop:  # one loop: the model's async client is bound to it
        run_scenario(model, lambda text: loop.run(ask_async(agent, text)))


def test_owner_comes_from_the_run_context(model: FakeModel, engine: MemoryEngine) -> None:
    agent = make_agent(model, engine)
    check_bob(model, lambda text: ask(agent, text, thread="bob-thread", user="bob"))


def test_remember_tool_goes_through_the_write_path(model: FakeModel, engine: MemoryEngine) -> None:
    agent = make_agent(model, engine)
    check_remember(model, engine, lambda text: ask(agent, text, thread="w"), "langchain")


def test_the_middleware_over_a_memlane_serve_url(model: FakeModel, tmp_path: Path) -> None:
    """The same turns through a real ``memlane serve`` (POST /v1/turn, POST /v1/memories)."""
    open_engine(tmp_path).close()  # the scenario's memories, in the store the server opens
    with run_server(Backend("sqlite", tmp_path)) as served, closing(connect(served.url)) as client:
        agent = make_agent(model, client)
        run_scenario(model, lambda text: ask(agent, text, thread="over-http"))
        engine = open_engine_as_is(tmp_path)
        try:
            check_remember(model, engine, lambda text: ask(agent, text, thread="w"), "langchain")
        finally:
            engine.close()


def test_learn_gives_each_run_to_memlanes_learn(model: FakeModel, tmp_path: Path) -> None:
    """``learn=True``: after the run, its user and assistant messages go to the configured LLM
    (a fake OpenAI-compatible one, tests/llm_server.py), whose memories go through the write
    path in the run's scope; the memlane text the model got is not in what is learned."""
    script = Script("openai", steps=[Reply(json.dumps({"memories": [LEARNED]}))])
    with serve(script) as url:
        llm = make_llm(LLMSettings(provider="openai", model="m", base_url=url, max_retries=0))
        engine = open_engine_as_is(tmp_path, llm=llm)
        try:
            seed(engine)
            agent = make_agent(model, engine, learn=True)
            ask(agent, TURNS[0], thread="learned")
            saved = [m for m in engine.list(owner="alice") if m.content == LEARNED["content"]]
            assert [(m.project, m.session) for m in saved] == [(PROJECT, "learned")]
        finally:
            engine.close()
    transcript = json.dumps(script.requests[0]["json"])
    assert TURNS[0] in transcript and DEPLOY not in transcript
