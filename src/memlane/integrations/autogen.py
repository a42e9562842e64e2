"""memlane in AutoGen 0.7 (autogen-agentchat / autogen-core): :class:`MemlaneMemory`, an
``autogen_core.memory.Memory`` for ``AssistantAgent(..., memory=[MemlaneMemory(...)])``.

``AssistantAgent`` calls every memory's ``update_context`` once per invocation (a user turn),
after the new message is in its model context and before the first model call; the tool loop's
later model calls read the same model context. The memory asks the turn model
(:meth:`memlane.MemoryEngine.turn`, ``kept=True``: the text is added to the model context as a
``SystemMessage`` and stays there for the rest of the conversation) and adds this turn's block:
every model call of the turn holds it once, and a memory an earlier turn showed is still in the
context, so memlane's no-repeat window does not show it again while it is within the window. A
model context that drops old messages (``BufferedChatCompletionContext``) drops blocks with them:
a memory whose block fell out comes back only when the count of user messages in view falls to
one already recorded (the turn model resets the session as for a compaction) or after the window;
the memories of the blocks still in view are passed as ``known``, so a reset never adds them a
second time. The same
turn asked again (a run without a new message; the same first message after ``on_reset``) adds
its block only when the context no longer holds it.

``query`` is memlane's hybrid search in the memory's scope; ``add`` offers a text
``MemoryContent`` to the write path (duplicates, secrets, ``<private>`` as for every write);
``clear`` forgets every memory of the scope (``memlane forget``); ``close`` closes the client;
:meth:`MemlaneMemory.remember_tool` is a ``remember`` tool for the agent.

Ids (docs/frameworks.md): AutoGen's memory sees no session nor user id, so the session, owner,
project and agent are the memory's own (``owner=None`` leaves it to memlane's scope rule). One
``MemlaneMemory`` per conversation (an agent's model context is one conversation).

Supported: autogen-agentchat / autogen-core >=0.4.3,<0.8 (``Memory.update_context`` on a
``ChatCompletionContext`` and ``AssistantAgent(memory=...)``, both new in 0.4.3; tested with
0.7.5).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from typing import Any

from memlane.integrations._base import (
    REMEMBER_DOC,
    Door,
    UnsupportedFramework,
    require,
    search_limit,
)

VERSION = require("autogen-core", "0.4.3", "0.8", "autogen")
require("autogen-agentchat", "0.4.3", "0.8", "autogen")

try:
    from autogen_core import CancellationToken
    from autogen_core.memory import (
        Memory,
        MemoryContent,
        MemoryMimeType,
        MemoryQueryResult,
        UpdateContextResult,
    )
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import LLMMessage, SystemMessage, UserMessage
    from autogen_core.tools import FunctionTool
except ImportError as missing:  # pragma: no cover - a 0.4-0.7 without the seam
    raise UnsupportedFramework(
        f"autogen-core {VERSION} lacks {missing.name}: memlane's adapter needs autogen-core "
        ">=0.4.3,<0.8; pip install 'memlane[autogen]'"
    ) from missing

__all__ = ["MemlaneMemory"]

#: The MIME types whose content ``add`` takes as text.
TEXT_TYPES = (MemoryMimeType.TEXT.value, MemoryMimeType.MARKDOWN.value, MemoryMimeType.JSON.value)


def _pairs(messages: Sequence[LLMMessage]) -> Iterable[tuple[str, str]]:
    """``(role, text)`` of a model context: a ``UserMessage``'s text parts as ``user`` (in a
    team, another agent's message is one too), the rest by type (their text does not matter:
    only the user messages are counted and read)."""
    for message in messages:
        if isinstance(message, UserMessage):
            content = message.content
            parts = [content] if isinstance(content, str) else content
            yield "user", "\n".join(p for p in parts if isinstance(p, str))
        else:
            yield message.type, ""


def _text(content: MemoryContent) -> str:
    mime = getattr(content.mime_type, "value", content.mime_type)
    if mime not in TEXT_TYPES:
        raise ValueError(
            f"memlane: MemoryContent.mime_type {mime!r} is not text; memlane stores text: "
            f"give one of {', '.join(TEXT_TYPES)}"
        )
    value = content.content
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        raise ValueError(
            f"memlane: MemoryContent.content is {type(value).__name__}, not text; give a str"
        )
    return value


class MemlaneMemory(Memory):  # type: ignore[misc]
    """memlane's memories for each user turn of an AutoGen agent, kept in its model context.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        session: the conversation's session id (required: AutoGen names none).
        owner, project, agent: the scope of every read and write (``owner=None``: memlane's
            scope rule; ``project=None``: every memory of the owner is read, writes are global).
        limit: how many hits ``query`` returns.
        name: the memory's name (AutoGen shows it in ``MemoryQueryEvent``).
        token: ``memlane serve``'s bearer token (with a URL).

    Raises:
        ValueError: ``session`` is empty; ``limit`` (here or ``query``'s) is not a whole number
            >= 1; (on ``add``) a content that is not text.
    """

    component_provider_override = "memlane.integrations.autogen.MemlaneMemory"

    def __init__(
        self,
        memory: Any,
        *,
        session: str,
        owner: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        limit: int = 10,
        name: str = "memlane",
        token: str | None = None,
    ) -> None:
        if not session:
            raise ValueError(
                "memlane: MemlaneMemory needs session= (the conversation's id; AutoGen names none)"
            )
        self.door = Door(
            memory, owner=owner, project=project, agent=agent, session=session, token=token,
            source="autogen", hint="pass session= to MemlaneMemory", kept=True,
        )  # fmt: skip
        self.limit = search_limit(limit, "MemlaneMemory", "query")
        self.name = name
        #: The blocks this memory added, each with its memories' ids (to tell the turn model
        #: which memories the model context still holds).
        self._added: dict[str, tuple[str, ...]] = {}

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add this turn's block to ``model_context`` as a ``SystemMessage``, once: a turn
        already decided (the agent run again with no new message, or the same first message
        after ``on_reset``) adds its block only when the context no longer holds it."""
        messages = await model_context.get_messages()
        held = [m.content for m in messages if isinstance(m, SystemMessage)]
        known = [i for block in held for i in self._added.get(block, ())]
        view = await self.door.aview(_pairs(messages), session=None, context=None, known=known)
        none = UpdateContextResult(memories=MemoryQueryResult(results=[]))
        if view is None or not view.block:
            return none
        if view.repeat and view.block in held:
            return none
        await model_context.add_message(SystemMessage(content=view.block))
        self._added[view.block] = view.ids
        shown = MemoryContent(
            content=view.block,
            mime_type=MemoryMimeType.MARKDOWN,
            metadata={"turn": view.key, "ids": list(view.ids)},
        )
        return UpdateContextResult(memories=MemoryQueryResult(results=[shown]))

    async def query(
        self,
        query: str | MemoryContent,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        """memlane's hybrid search in the memory's scope: one ``MemoryContent`` per hit, best
        first, its metadata the memory's ``id``, ``project``, ``type`` and the hit's ``score``.
        ``limit=`` overrides the memory's."""
        text = query if isinstance(query, str) else _text(query)
        limit = search_limit(kwargs.get("limit", self.limit), "MemlaneMemory.query", "query")
        hits = await self.door.memory.asearch(text, scope=self.door.scope, limit=limit)
        return MemoryQueryResult(results=[_content(hit) for hit in hits])

    async def add(
        self, content: MemoryContent, cancellation_token: CancellationToken | None = None
    ) -> None:
        """Offer ``content`` (text, markdown or JSON) to memlane's write path in the memory's
        scope and session; its ``metadata`` is stored with the memory."""
        fields: dict[str, Any] = {"source": "autogen"}
        if content.metadata:
            fields["metadata"] = dict(content.metadata)
        await self.door.memory.aadd(
            _text(content), scope=self.door.scope, session=self.door.session, **fields
        )

    async def clear(self) -> None:
        """Forget every active memory of the scope (with a project: that project's, not the
        owner's global ones), as ``memlane forget`` does each."""
        client, scope = self.door.memory, self.door.scope

        def forget_all() -> None:
            while True:
                rows = [
                    m
                    for m in client.memories(scope=scope, limit=100)
                    if scope.project is None or m.get("project") == scope.project
                ]
                if not rows:
                    return
                for row in rows:
                    client.forget(str(row["id"]), scope=scope)

        await asyncio.to_thread(forget_all)

    def remember_tool(self) -> FunctionTool:
        """A ``remember(content)`` tool for the agent's ``tools`` (the write path, in the memory's
        scope and session; the model is told what the write did)."""
        door = self.door

        async def remember(content: str) -> str:
            return await door.aremember(content, session=None, context=None)

        return FunctionTool(remember, description=REMEMBER_DOC, name="remember")

    async def close(self) -> None:
        """Close the client (an engine given in-process stays open)."""
        self.door.memory.close()


def _content(hit: dict[str, Any]) -> MemoryContent:
    memory = hit["memory"]
    meta = {k: memory.get(k) for k in ("id", "project", "type")} | {"score": hit.get("score")}
    return MemoryContent(content=memory["content"], mime_type=MemoryMimeType.TEXT, metadata=meta)
