"""memlane in a real Pydantic AI 2.x agent (pydantic-ai-slim[openai] from PyPI, the
``pydantic-ai`` extra) with an OpenAI chat model against the fake OpenAI-compatible model
(tests/fw_support.py); :class:`MemlaneCapability` as one of the agent's capabilities."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

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
from memlane.integrations.pydantic_ai import MemlaneCapability


def lookup(topic: str) -> str:
    """Look a topic up in the team's notes."""
    return f"notes about {topic}"


class Chat:
    """One conversation: each run continues the last one's message history (Pydantic AI keeps
    its conversation_id there), on one event loop; ``deps`` name the user."""

    def __init__(self, model: FakeModel, engine: MemoryEngine, user: str = "alice") -> None:
        self.loop = asyncio.Runner()
        provider = OpenAIProvider(base_url=model.url, api_key="test")
        self.provider = provider
        self.agent: Agent[dict[str, str], str] = Agent(
            OpenAIChatModel("fake", provider=provider),
            instructions="You are a helpful assistant.",
            deps_type=dict,
            tools=[lookup],
            capabilities=[MemlaneCapability(engine, project=PROJECT)],
        )
        assert lookup.__name__ == TOOL
        self.deps = {"user_id": user}
        self.history: list[Any] = []

    def ask(self, text: str) -> Any:
        result = self.loop.run(self.agent.run(text, deps=self.deps, message_history=self.history))
        self.history = result.all_messages()
        return result

    def close(self) -> None:
        self.loop.run(self.provider.client.close())
        self.loop.close()


@pytest.fixture
def chat(model: FakeModel, engine: MemoryEngine) -> Iterator[Chat]:
    chat = Chat(model, engine)
    yield chat
    chat.close()


def test_each_model_call_of_a_turn_holds_its_memories_once(model: FakeModel, chat: Chat) -> None:
    run_scenario(model, chat.ask)


def test_owner_comes_from_the_deps(model: FakeModel, engine: MemoryEngine) -> None:
    chat = Chat(model, engine, user="bob")
    try:
        check_bob(model, chat.ask)
    finally:
        chat.close()


def test_remember_tool_goes_through_the_write_path(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    check_remember(model, engine, chat.ask, "pydantic-ai")
