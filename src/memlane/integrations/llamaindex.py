"""memlane in LlamaIndex: :class:`MemlaneBlock`, a memory block of
``llama_index.core.memory.Memory`` (``Memory.from_defaults(session_id=..., memory_blocks=[...])``).

An agent workflow (``FunctionAgent``, ``AgentWorkflow``) reads its memory before each step, and
the memory asks each block for its text (``_aget``) and renders it into the system message of
that step's model call; the text is never stored in the chat history. The block asks the turn
model (:meth:`memlane.MemoryEngine.turn`, ``kept=False``) and returns :attr:`TurnView.text`:
every step of a turn gets the same block, and a memory an earlier turn showed comes back while it
is within the window.

Ids (docs/frameworks.md): the session is the ``Memory``'s ``session_id`` (LlamaIndex passes it to
the block); the owner, project and agent are the block's (LlamaIndex's memory has no user id):
``owner=None`` leaves it to memlane's scope rule. :meth:`MemlaneBlock.remember_tool` is a
``remember`` ``FunctionTool`` writing in the same scope.

Supported: llama-index-core >=0.12.36,<0.15 (``Memory`` with memory blocks).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memlane.integrations._base import REMEMBER_DOC, Door, require

VERSION = require("llama-index-core", "0.12.36", "0.15", "llamaindex")

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.memory.memory import BaseMemoryBlock  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from pydantic import ConfigDict, Field, PrivateAttr  # noqa: E402

__all__ = ["MemlaneBlock"]


def _pairs(messages: Sequence[ChatMessage]) -> Iterable[tuple[str, str]]:
    pairs = [(str(m.role.value), m.content or "") for m in messages]
    # After a tool step the workflow reads its memory with the turn's message as ``input`` again,
    # which the memory appends to a history that already ends with it: the same message.
    if len(pairs) >= 2 and pairs[-1][0] == "user" and pairs[-1] == pairs[-2]:
        pairs.pop()
    return pairs


class MemlaneBlock(BaseMemoryBlock[str]):  # type: ignore[misc]
    """memlane's memories for the current turn, as one LlamaIndex memory block.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        owner, project, agent: the scope (``owner=None``: memlane's scope rule).
        name, priority: the block's (LlamaIndex renders ``<name>...</name>``; priority 0 is
            never truncated).
        token: ``memlane serve``'s bearer token (with a URL).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    accept_short_term_memory: bool = Field(default=False)
    _door: Door = PrivateAttr()

    def __init__(
        self,
        memory: Any,
        *,
        owner: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        name: str = "memlane",
        priority: int = 0,
        token: str | None = None,
    ) -> None:
        super().__init__(name=name, priority=priority)
        hint = "build the agent's memory with Memory.from_defaults(session_id=...)"
        self._door = Door(
            memory, owner=owner, project=project, agent=agent, session=None, token=token,
            source="llamaindex", hint=hint,
        )  # fmt: skip

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        pairs = _pairs(messages or [])
        text = await self._door.atext(pairs, session=block_kwargs.get("session_id"), context=None)
        return text or ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Nothing: the block does not take the messages the memory flushes
        (``accept_short_term_memory`` is off); memories are written with the remember tool."""

    def remember_tool(self, session: str | None = None) -> FunctionTool:
        """A ``remember(content)`` tool writing in this block's scope (the write path)."""
        door = self._door

        async def remember(content: str) -> str:
            return await door.aremember(content, session=session, context=None)

        remember.__doc__ = REMEMBER_DOC
        return FunctionTool.from_defaults(async_fn=remember, name="remember")
