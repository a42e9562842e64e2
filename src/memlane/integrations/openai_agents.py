"""memlane in the OpenAI Agents SDK: :class:`MemlaneInputFilter`, a
``RunConfig(call_model_input_filter=...)``.

The SDK calls the filter before every model call of a run (a run with tool calls makes several)
with the instructions and the input items it is about to send. The filter asks the turn model
(:meth:`memlane.MemoryEngine.turn`, ``kept=False``: the text is added to that call's
instructions and never enters the run's items nor a ``Session``'s history) and returns the
instructions with :attr:`TurnView.text` appended: every call of a turn gets the same block, and a
memory an earlier turn showed comes back while it is within the window.

Ids (docs/frameworks.md): read from the run's ``context`` (``Runner.run(..., context=...)``, a
mapping or an object): the session from ``session_id`` / ``thread_id`` / ``session``, the owner
from ``user_id`` / ``owner``, ``project``, ``agent``; else the filter's own ``session=``,
``owner=``... (the owner else memlane's scope rule). :meth:`MemlaneInputFilter.remember_tool`
is a ``remember`` function tool in the same scope.

Supported: openai-agents >=0.14,<1 (``RunConfig.call_model_input_filter``, ``CallModelData``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memlane.integrations._base import (
    Memlane,
    Scope,
    connect,
    find_session,
    last_user_turn,
    remember_reply,
    require,
    session_of,
)

VERSION = require("openai-agents", "0.14", "1", "openai-agents")

from agents import RunContextWrapper, function_tool  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402

__all__ = ["MemlaneInputFilter"]


def _text(content: Any) -> str:
    """An input item's content as text (a string, or the ``text`` of its parts)."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text")) for p in parts if isinstance(p, Mapping) and p.get("text"))


def _pairs(items: Iterable[Any]) -> Iterable[tuple[str, str]]:
    for item in items:
        if isinstance(item, Mapping) and item.get("role"):
            yield str(item["role"]), _text(item.get("content"))


class MemlaneInputFilter:
    """``RunConfig(call_model_input_filter=MemlaneInputFilter(memory, ...))``.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        owner, project, agent, session: used when the run's context names none.
        token: ``memlane serve``'s bearer token (with a URL).

    Raises:
        ValueError: (on a model call) neither the context nor ``session=`` names a session.
    """

    def __init__(
        self,
        memory: Any,
        *,
        owner: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        token: str | None = None,
    ) -> None:
        self.memory: Memlane = connect(memory, token=token)
        self.scope = Scope(owner, project, agent)
        self.session = session

    def _session(self, context: object) -> str:
        return session_of(
            context,
            self.session,
            hint="pass context={'session_id': ...} to Runner.run, or MemlaneInputFilter(session=...)",
        )

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        found = last_user_turn(_pairs(data.model_data.input))
        if found is None:
            return data.model_data
        message, position = found
        view = await self.memory.aturn(
            self._session(data.context),
            message,
            kept=False,
            position=position,
            scope=self.scope.of(data.context),
        )
        if view.text is None:
            return data.model_data
        before = data.model_data.instructions
        instructions = f"{before}\n\n{view.text}" if before else view.text
        return ModelInputData(input=data.model_data.input, instructions=instructions)

    def remember_tool(self) -> Any:
        """A ``remember(content)`` function tool writing in the run's scope (the write path)."""
        owner = self

        @function_tool
        async def remember(ctx: RunContextWrapper[Any], content: str) -> str:
            """Save a fact, preference or decision about the user for later conversations.

            Args:
                content: the fact to remember, one sentence.
            """
            done = await owner.memory.aadd(
                content,
                scope=owner.scope.of(ctx.context),
                session=find_session(ctx.context, owner.session),
                source="openai-agents",
            )
            return remember_reply(done)

        return remember
