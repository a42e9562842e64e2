"""memlane in a real LlamaIndex ``FunctionAgent`` (llama-index-core from PyPI, the
``llamaindex`` extra): :class:`MemlaneBlock` as a block of the agent's ``Memory``, the model the
fake OpenAI-compatible server (tests/fw_support.py).

LlamaIndex's own OpenAI LLM (llama-index-llms-openai, every version up to 0.8.3) requires
openai<3, which memlane's ``llm`` extra is past, so the agent's LLM here is :class:`ChatLLM`: a
small ``FunctionCallingLLM`` on the openai SDK's chat completions (the requests are real HTTP
requests the fake model records; the agent loop, the memory and its blocks are LlamaIndex's).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")

# llama-index-workflows lists an agent's members with inspect.getmembers, which reads pydantic's
# deprecated attributes (``__fields__``, ``model_computed_fields`` on an instance): LlamaIndex's
# warnings, not memlane's.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
    ChatResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms.function_calling import FunctionCallingLLM  # noqa: E402
from llama_index.core.llms.llm import ToolSelection  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

from fw_fixtures import engine, model  # noqa: E402, F401  (shared fixtures)
from fw_support import (  # noqa: E402
    PROJECT,
    TOOL,
    FakeModel,
    check_remember,
    run_scenario,
)
from memlane import MemoryEngine  # noqa: E402
from memlane.integrations.llamaindex import MemlaneBlock  # noqa: E402


def _wire(message: ChatMessage) -> dict[str, Any]:
    """One LlamaIndex message as a chat-completions message."""
    extra = message.additional_kwargs
    if message.role == MessageRole.TOOL:
        return {"role": "tool", "tool_call_id": extra["tool_call_id"], "content": message.content}
    wired: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if extra.get("tool_calls"):
        wired["tool_calls"] = extra["tool_calls"]
    return wired


class ChatLLM(FunctionCallingLLM):  # type: ignore[misc]
    """Chat completions with tools over the openai SDK (non-streaming; the agent is built with
    ``streaming=False``)."""

    _client: AsyncOpenAI = PrivateAttr()

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self._client = AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="fake", is_chat_model=True, is_function_calling_model=True)

    def _prepare_chat_with_tools(
        self, tools: Sequence[Any], user_msg: Any = None, chat_history: Any = None, **kw: Any
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(ChatMessage(role="user", content=str(user_msg)))
        specs = [
            {"type": "function", "function": t.metadata.to_openai_tool()["function"]} for t in tools
        ]
        return {"messages": messages, "tools": specs}

    async def achat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResponse:
        done = await self._client.chat.completions.create(
            model="fake", messages=[_wire(m) for m in messages], tools=kw.get("tools") or []
        )
        reply = done.choices[0].message
        calls = [c.model_dump() for c in reply.tool_calls or []]
        extra = {"tool_calls": calls} if calls else {}
        return ChatResponse(
            message=ChatMessage(role="assistant", content=reply.content, additional_kwargs=extra)
        )

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kw: Any
    ) -> list[ToolSelection]:
        return [
            ToolSelection(
                tool_id=c["id"],
                tool_name=c["function"]["name"],
                tool_kwargs=json.loads(c["function"]["arguments"]),
            )
            for c in response.message.additional_kwargs.get("tool_calls", [])
        ]

    def chat(self, *a: Any, **kw: Any) -> Any:
        raise NotImplementedError

    complete = stream_chat = stream_complete = chat

    async def acomplete(self, *a: Any, **kw: Any) -> Any:
        raise NotImplementedError

    astream_chat = astream_complete = acomplete

    async def aclose(self) -> None:
        await self._client.close()


def lookup(topic: str) -> str:
    """Look a topic up in the team's notes."""
    return f"notes about {topic}"


class Chat:
    """One LlamaIndex conversation: a FunctionAgent whose ``Memory`` (session ``session``)
    holds memlane's block; each ``ask`` is one ``agent.run`` on the same loop."""

    def __init__(self, model: FakeModel, engine: MemoryEngine, owner: str = "alice") -> None:
        self.loop = asyncio.Runner()
        self.llm = ChatLLM(model.url)
        block = MemlaneBlock(engine, owner=owner, project=PROJECT)
        self.memory = Memory.from_defaults(session_id=f"{owner}-chat", memory_blocks=[block])
        self.agent = FunctionAgent(
            tools=[FunctionTool.from_defaults(lookup, name=TOOL), block.remember_tool()],
            llm=self.llm,
            system_prompt="You are a helpful assistant.",
            streaming=False,
        )

    def ask(self, text: str) -> Any:
        return self.loop.run(self._ask(text))

    async def _ask(self, text: str) -> Any:
        return await self.agent.run(text, memory=self.memory)

    def close(self) -> None:
        self.loop.run(self.llm.aclose())
        # The memory's chat store (SQLAlchemy on aiosqlite) has no close of its own: dispose of
        # its engine, or the connection is left to the garbage collector (a ResourceWarning).
        store_engine = self.memory.sql_store._async_engine
        if store_engine is not None:
            self.loop.run(store_engine.dispose())
        self.loop.close()


@pytest.fixture
def chat(model: FakeModel, engine: MemoryEngine) -> Iterator[Chat]:
    chat = Chat(model, engine)
    yield chat
    chat.close()


def test_each_model_call_of_a_turn_holds_its_memories_once(model: FakeModel, chat: Chat) -> None:
    run_scenario(model, chat.ask)


def test_remember_tool_goes_through_the_write_path(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    check_remember(model, engine, chat.ask, "llamaindex")
