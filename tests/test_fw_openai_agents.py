"""memlane in the OpenAI Agents SDK (openai-agents from PyPI, the ``openai-agents`` extra): a
real ``Runner.run`` loop with a chat-completions model against the fake OpenAI-compatible model
(tests/fw_support.py); :class:`MemlaneInputFilter` as ``RunConfig.call_model_input_filter``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from fw_fixtures import engine, model  # noqa: F401  (shared fixtures)
from fw_support import (
    PROJECT,
    TOOL,
    FakeModel,
    check_bob,
    check_remember,
    run_scenario,
)
from memlane import MemoryEngine
from memlane.integrations.openai_agents import MemlaneInputFilter

set_tracing_disabled(True)  # the SDK would export traces to OpenAI otherwise


@function_tool(name_override=TOOL)
def lookup(topic: str) -> str:
    """Look a topic up in the team's notes."""
    return f"notes about {topic}"


class Chat:
    """One conversation of an agent with memlane's filter, its history in an SDK ``Session``
    (what the SDK keeps: the filter's text is never in it), on one event loop."""

    def __init__(self, model: FakeModel, engine: MemoryEngine, user: str = "alice") -> None:
        self.filter = MemlaneInputFilter(engine, project=PROJECT)
        self.client = client = AsyncOpenAI(base_url=model.url, api_key="test", max_retries=0)
        self.agent = Agent(
            name="assistant",
            instructions="You are a helpful assistant.",
            model=OpenAIChatCompletionsModel(model="fake", openai_client=client),
            tools=[lookup, self.filter.remember_tool()],
        )
        self.context = {"user_id": user, "session_id": f"{user}-chat"}
        self.loop = asyncio.Runner()
        self.session = SQLiteSession(f"{user}-chat")

    def ask(self, text: str) -> Any:
        run = Runner.run(
            self.agent,
            text,
            context=self.context,
            session=self.session,
            run_config=RunConfig(call_model_input_filter=self.filter),
        )
        return self.loop.run(run)

    def close(self) -> None:
        self.session.close()
        self.loop.run(self.client.close())
        self.loop.close()


@pytest.fixture
def chat(model: FakeModel, engine: MemoryEngine) -> Iterator[Chat]:
    chat = Chat(model, engine)
    yield chat
    chat.close()


def test_each_model_call_of_a_turn_holds_its_memories_once(model: FakeModel, chat: Chat) -> None:
    run_scenario(model, chat.ask)


def test_owner_comes_from_the_run_context(model: FakeModel, engine: MemoryEngine) -> None:
    chat = Chat(model, engine, user="bob")
    try:
        check_bob(model, chat.ask)
    finally:
        chat.close()


def test_remember_tool_goes_through_the_write_path(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    check_remember(model, engine, chat.ask, "openai-agents")


def test_a_run_without_a_session_is_refused_with_the_fix(model: FakeModel, chat: Chat) -> None:
    chat.context = {"user_id": "alice"}
    with pytest.raises(Exception, match="no session for this run; pass context="):
        chat.ask("Where do we deploy the billing service?")
