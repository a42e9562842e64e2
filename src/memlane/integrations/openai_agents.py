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

from memlane.integrations._base import REMEMBER_DOC, Door, require

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
        hint = "pass context={'session_id': ...} to Runner.run, or MemlaneInputFilter(session=...)"
        self.door = Door(
            memory, owner=owner, project=project, agent=agent, session=session, token=token,
            source="openai-agents", hint=hint,
        )  # fmt: skip

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        pairs = _pairs(data.model_data.input)
        text = await self.door.atext(pairs, session=data.context, context=data.context)
        if text is None:
            return data.model_data
        before = data.model_data.instructions
        instructions = f"{before}\n\n{text}" if before else text
        return ModelInputData(input=data.model_data.input, instructions=instructions)

    def remember_tool(self) -> Any:
        """A ``remember(content)`` function tool writing in the run's scope (the write path)."""
        door = self.door

        async def remember(ctx: RunContextWrapper[Any], content: str) -> str:
            return await door.aremember(content, session=ctx.context, context=ctx.context)

        remember.__doc__ = REMEMBER_DOC
        return function_tool(remember)
