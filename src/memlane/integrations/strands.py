"""memlane in Strands Agents: :class:`MemlaneStore`, a Strands ``MemoryStore`` whose
:meth:`~MemlaneStore.injector` puts memlane's memories into every model call.

Strands 1.62's seams, read in its source: ``strands.memory.MemoryStore`` (``search``, ``add``,
``add_messages``, ``get_tools``), managed by ``strands.memory.MemoryManager`` (the
``search_memory`` / ``add_memory`` tools, background extraction, and its own injection: a search
with the latest message's text before a model call, ``"userTurn"`` by default); and the
``ContextInjector`` plugin (``strands.vended_plugins.context_injector``), which asks a callback
for text before each model call and folds it into the latest user message of that call only: the
text never enters ``agent.messages`` nor a session.

The manager's injection cannot hold memlane's turn: its ``"userTurn"`` trigger skips the tool
loop's later calls (they answer a tool result), and ``"everyTurn"`` searches each of them anew
with the assistant's words. So the memories come through :meth:`MemlaneStore.injector`, a
``ContextInjector`` with ``trigger="everyTurn"`` whose callback asks the turn model
(:meth:`memlane.MemoryEngine.turn`, ``kept=False``: Strands does not keep the text) and returns
:attr:`TurnView.text`: every call of a turn gets the same block once, and a memory an earlier
turn showed comes back while it is within the window. A ``MemoryManager`` holding this store
must be built with ``injection=False`` (:meth:`MemlaneStore.manager` does), else Strands adds
its own searched copy of the memories to the first call.

Writing, all through memlane's write path: ``add`` (the manager's ``add_memory`` tool and its
``ModelExtractor``), ``add_messages`` (the manager's extraction without an extractor: the user
and assistant messages go to memlane's ``learn``, which needs an LLM configured in memlane), and
the ``remember`` tool of :meth:`~MemlaneStore.get_tools` (registered by the manager; its answer
says what the write path did). ``search`` is memlane's hybrid search.

Ids (docs/frameworks.md): the injector and the ``remember`` tool read the agent's ``state``
(``Agent(state={...})`` / ``agent.state.set(...)``): the owner from ``user_id`` / ``owner``, the
session from ``session_id``, ``project``, ``agent``; else the store's ``owner=``, ``session=``...;
the session else ``agent.session_id`` (the session manager's id, else the ``Agent``'s own). The
manager's ``search`` / ``add`` / ``add_messages`` calls carry no agent: they use the store's scope.

Supported: strands-agents >=1.54,<2: ``Agent.session_id``, the newest name the adapter uses, is
first in 1.54 (``MemoryStore``, ``MemoryManager(injection=...)`` and ``ContextInjector(...,
trigger="everyTurn")`` are older; read in the wheels of 1.45 to 1.62). Tested: 1.62.0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from memlane.integrations._base import REMEMBER_DOC, Door, find_session, require

VERSION = require("strands-agents", "1.54", "2", "strands")

from strands import tool  # noqa: E402
from strands.memory import MemoryEntry, MemoryManager  # noqa: E402
from strands.vended_plugins.context_injector import ContextInjector  # noqa: E402

__all__ = ["MemlaneStore"]


def _pairs(messages: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, str]]:
    """``(role, text)`` of Strands messages; a ``user`` message carrying a tool result is the
    tool's (role ``"tool"``), not a user turn."""
    for message in messages:
        blocks = message.get("content") or []
        role = str(message.get("role"))
        if role == "user" and any("toolResult" in b for b in blocks):
            role = "tool"
        yield role, "\n".join(str(b["text"]) for b in blocks if "text" in b)


def _position(pairs: list[tuple[str, str]], agent: Any) -> int | None:
    """The turn's position for the turn model: the index (from 1) of the latest user message in
    the whole conversation, the messages the agent's conversation manager trimmed counted
    (``removed_message_count``). Strands' default manager keeps a sliding window of 40 messages:
    once it trims, the count of user messages left stops growing, and the turn model would read
    every new turn as a shrunk history and reset the session. A cleared ``agent.messages``
    (nothing counted as removed) still lowers it: a reset, as it should be."""
    asks = [i for i, (role, _) in enumerate(pairs) if role == "user"]
    if not asks:
        return None
    removed = getattr(getattr(agent, "conversation_manager", None), "removed_message_count", 0)
    return int(removed or 0) + asks[-1] + 1


class MemlaneStore:
    """memlane as a Strands ``MemoryStore``, with the injector that shows its memories.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        owner, project, agent, session: the scope when the agent's state names none
            (``owner=None``: memlane's scope rule).
        name, description: the store's, as Strands' memory tools show them.
        max_search_results: ``search``'s default limit (Strands' ``MemoryStoreConfig`` field).
        extraction: Strands' automatic extraction for this store (``True`` or an
            ``ExtractionConfig``: the manager hands the conversation to :meth:`add_messages`,
            i.e. memlane's ``learn``; ``None``: off).
        token: ``memlane serve``'s bearer token (with a URL).
    """

    writable = True

    def __init__(
        self,
        memory: Any,
        *,
        owner: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        name: str = "memlane",
        description: str | None = "Long-term memories about the user and their projects.",
        max_search_results: int | None = 5,
        extraction: Any = None,
        token: str | None = None,
    ) -> None:
        hint = "set agent.state 'session_id', or MemlaneStore(session=...)"
        self.door = Door(
            memory, owner=owner, project=project, agent=agent, session=session, token=token,
            source="strands", hint=hint,
        )  # fmt: skip
        self.name = name
        self.description = description
        self.max_search_results = max_search_results
        self.extraction = extraction

    # ------------------------------------------------------------------ reading
    def _ids(self, agent: Any) -> tuple[dict[str, Any], str]:
        """The agent's state (the context: owner, project, agent) and the turn's session."""
        state = agent.state.get() or {}
        session = find_session(state, self.door.session) or str(agent.session_id)
        return state, session

    async def text(self, context: Any) -> str | None:
        """The ``ContextInjector`` callback: this model call's memlane text (``None``: none).
        ``context``: Strands' ``InjectionContext`` (``messages``, ``agent``)."""
        state, session = self._ids(context.agent)
        pairs = list(_pairs(context.messages))
        return await self.door.atext(
            pairs, session=session, context=state, position=_position(pairs, context.agent)
        )

    def injector(self, name: str = "memlane") -> Any:
        """The ``ContextInjector`` plugin (``Agent(plugins=[store.injector()])``) giving every
        model call its turn's memlane text (``trigger="everyTurn"``)."""
        return ContextInjector(self.text, name=name, trigger="everyTurn")

    def manager(self, **config: Any) -> Any:
        """A ``MemoryManager`` of this store (``Agent(memory_manager=...)``) with Strands' own
        injection off (the injector shows the memories); ``config``: the manager's other
        arguments (``search_tool_config``, ``add_tool_config``)."""
        return MemoryManager(stores=[self], injection=False, **config)

    async def search(self, query: str, options: Mapping[str, Any] | None = None) -> list[Any]:
        """memlane's hybrid search in the store's scope, best first: ``MemoryEntry`` with the
        memory's ``id``, ``type``, ``project`` and ``score`` as metadata."""
        limit = (options or {}).get("max_search_results") or self.max_search_results or 5
        hits = await self.door.memory.asearch(query, scope=self.door.scope, limit=int(limit))
        return [
            MemoryEntry(
                content=h["memory"]["content"],
                metadata={
                    "id": h["memory"]["id"],
                    "type": h["memory"].get("type"),
                    "project": h["memory"].get("project"),
                    "score": h.get("score"),
                },
            )
            for h in hits
        ]

    # ------------------------------------------------------------------ writing
    async def add(self, content: str, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Offer ``content`` to memlane's write path in the store's scope; the write's
        ``to_dict()`` (``decision``, ``duplicate``, ``memory``)."""
        write = self.door._write(None, None)
        extra = {"metadata": dict(metadata)} if metadata else {}
        return await self.door.memory.aadd(content, **write, **extra)

    async def add_messages(
        self, messages: list[Mapping[str, Any]], context: Any = None
    ) -> list[dict[str, Any]]:
        """The messages' user and assistant text to memlane's ``learn`` (the configured LLM
        extracts memories, written through the write path in the store's scope and session);
        tool calls and results are left out. Each write's ``to_dict()``.

        Raises:
            memlane.errors.ConfigError: memlane has no LLM configured (it names
                ``llm.provider`` and how to set it).
        """
        pairs = list(_pairs(messages))
        return await asyncio.to_thread(self.door.learn, pairs, session=None, context=None)

    def get_tools(self) -> list[Any]:
        """The ``remember`` tool (the ``MemoryManager`` registers it with its own): a memory
        offered to the write path in the agent's scope; its answer says what was done."""
        door, ids = self.door, self._ids

        async def remember(content: str, tool_context: Any) -> str:
            state, session = ids(tool_context.agent)
            return await door.aremember(content, session=session, context=state)

        remember.__doc__ = REMEMBER_DOC
        return [tool(name="remember", context=True)(remember)]
