"""memlane in Google ADK 2.x: :class:`MemlaneMemoryService` (a ``BaseMemoryService`` for
``Runner(memory_service=...)``) and its per-step injection, :meth:`MemlaneMemoryService.tool`
(a tool in the agent's ``tools=[...]``).

ADK calls every tool's ``process_llm_request`` before each LLM step of an invocation (a run with
tool calls makes several). The injection tool declares no function (the model never calls it): it
asks the turn model (:meth:`memlane.MemoryEngine.turn`, ``kept=False``: the text is appended to
that step's system instruction and never enters the session's events) and appends
:attr:`TurnView.text`: every step of a turn gets the same block, and a memory an earlier turn
showed comes back while it is within the window.

The memory service: ``search_memory`` is memlane's hybrid search in the user's scope (what ADK's
``load_memory`` / ``preload_memory`` tools read); ``add_session_to_memory`` gives the session's
user and model texts to memlane's ``learn`` (needs ``[llm]`` configured; with the session id,
only what was not learned before is read), ``add_events_to_memory`` the texts of the events it is
given (a delta); ``add_memory`` offers each entry's text to the write
path. :meth:`MemlaneMemoryService.remember_tool` is a ``remember`` function tool.

Ids (docs/frameworks.md): the session is the ADK session's id; the owner is its ``user_id``
(ADK always has one); ``project`` and ``agent`` are the service's.

Supported: google-adk >=2.0,<3 (``google.adk.agents.context.Context``, the one context of tools
and callbacks since 2.0; 1.x's ``ToolContext`` class is gone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memlane.integrations._base import (
    REMEMBER_DOC,
    Door,
    UnsupportedFramework,
    require,
    search_limit,
)

VERSION = require("google-adk", "2.0", "3", "adk")

try:
    from google.adk.agents.context import Context
    from google.adk.memory import BaseMemoryService
    from google.adk.memory.base_memory_service import SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.models.llm_request import LlmRequest
    from google.adk.tools import BaseTool, FunctionTool
    from google.genai import types
except ImportError as missing:  # a 2.x without the seam
    raise UnsupportedFramework(
        f"google-adk {VERSION} lacks a name memlane's adapter uses ({missing}); it needs "
        "google-adk >=2.0,<3: pip install 'memlane[adk]'"
    ) from missing

__all__ = ["MemlaneMemoryService", "MemlaneTool"]


def _text(content: types.Content | None) -> str:
    """A content's text parts (a function call or response has none)."""
    return "\n".join(p.text for p in (content.parts or []) if p.text) if content else ""


def _pairs(events: Iterable[Any]) -> Iterable[tuple[str, str]]:
    """``(role, text)`` of a session's events: the user's texts as ``user``, an agent's as
    ``assistant``; function calls and responses (role ``user`` in ADK) are left out."""
    for event in events:
        text = _text(event.content)
        if text:
            yield ("user" if event.author == "user" else "assistant"), text


class MemlaneTool(BaseTool):  # type: ignore[misc]
    """The per-step injection: memlane's text for the current turn in every LLM step's system
    instruction. Made by :meth:`MemlaneMemoryService.tool` (which works whether or not that
    service is also the runner's ``memory_service``); goes in the agent's ``tools=[...]``. It
    declares no function, so the model never sees it as a tool."""

    def __init__(self, door: Door) -> None:
        super().__init__(name="memlane", description="memlane's memories for this turn")
        self.door = door

    async def process_llm_request(self, *, tool_context: Context, llm_request: LlmRequest) -> None:
        session = tool_context.session
        pairs = _pairs(session.events)
        text = await self.door.atext(
            pairs, session=session.id, context={"user_id": tool_context.user_id}
        )
        if text:
            llm_request.append_instructions([text])


class MemlaneMemoryService(BaseMemoryService):  # type: ignore[misc]
    """``Runner(..., memory_service=MemlaneMemoryService(memory))``.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        project, agent: the scope of every read and write (``None``: every memory of the user
            is read, writes are global).
        owner: used only where ADK names no user (never: every ADK call has a ``user_id``).
        limit: how many search hits ``search_memory`` returns.
        token: ``memlane serve``'s bearer token (with a URL).

    Raises:
        ValueError: ``limit`` is not a positive whole number.
        memlane.ConfigError: ``add_session_to_memory`` without ``[llm]`` configured.
    """

    def __init__(
        self,
        memory: Any,
        *,
        owner: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        limit: int = 10,
        token: str | None = None,
    ) -> None:
        self.limit = search_limit(limit, "MemlaneMemoryService", "search_memory")
        self.door = Door(
            memory, owner=owner, project=project, agent=agent, session=None, token=token,
            source="adk", hint="run the agent with an ADK Runner (its session has an id)",
        )  # fmt: skip

    def tool(self) -> MemlaneTool:
        """The per-step injection tool (put it in the agent's ``tools``)."""
        return MemlaneTool(self.door)

    def remember_tool(self) -> FunctionTool:
        """A ``remember(content)`` function tool writing in the run's scope (the write path)."""
        door = self.door

        async def remember(content: str, tool_context: Context) -> str:
            session = tool_context.session
            owner = {"user_id": tool_context.user_id}
            return await door.aremember(content, session=session.id, context=owner)

        remember.__doc__ = REMEMBER_DOC
        return FunctionTool(remember)

    async def add_session_to_memory(self, session: Any) -> None:
        pairs = list(_pairs(session.events))
        owner = {"user_id": session.user_id}
        await asyncio.to_thread(self.door.learn, pairs, session=session.id, context=owner)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Any],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """``events`` (a delta, e.g. the latest turn) to memlane's ``learn``: all of their user
        and model texts are read (no session bookkeeping, which counts a whole history), the
        memories written without a session.

        Raises:
            memlane.ConfigError: no ``[llm]`` configured.
        """
        pairs = list(_pairs(events))
        owner = {"user_id": user_id}
        await asyncio.to_thread(self.door.learn, pairs, session=None, context=owner)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        for entry in memories:
            text = _text(entry.content)
            if text:
                await self.door.aremember(text, session=None, context={"user_id": user_id})

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        scope = self.door.scope.merged(owner=user_id)
        hits = await self.door.memory.asearch(query, scope=scope, limit=self.limit)
        return SearchMemoryResponse(memories=[_entry(hit) for hit in hits])


def _entry(hit: Mapping[str, Any]) -> MemoryEntry:
    memory = hit["memory"]
    return MemoryEntry(
        id=str(memory["id"]),
        content=types.Content(role="user", parts=[types.Part(text=memory["content"])]),
        author="memlane",
        timestamp=memory.get("created_at"),
        custom_metadata={"score": hit.get("score"), "project": memory.get("project")},
    )
