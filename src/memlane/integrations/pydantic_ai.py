"""memlane in a Pydantic AI 2.x agent: :class:`MemlaneCapability`
(``Agent(..., capabilities=[MemlaneCapability(memory)])``).

Pydantic AI calls a capability's ``before_model_request`` once per model request step, so a run
whose model calls tools makes several. Each asks the turn model
(:meth:`memlane.MemoryEngine.turn`, ``kept=False``: the text goes into that request's
instructions, never into the run's message history) and adds :attr:`TurnView.text` as one more
instruction part: every request of a turn gets the same block, and a memory an earlier turn
showed comes back while it is within the window. The capability's toolset holds a ``remember``
tool (``remember=False`` leaves it out) writing in the same scope.

Ids (docs/frameworks.md): the session is the run's ``conversation_id`` (Pydantic AI keeps it
across runs that pass ``message_history``, or ``agent.run(..., conversation_id=...)``); the owner
is ``user_id`` / ``owner`` of the run's ``deps`` (a mapping or an object), else ``owner=``, else
memlane's scope rule; ``project`` and ``agent`` likewise.

Supported: pydantic-ai-slim >=2.0,<3 (capabilities; 1.x had ``history_processors`` instead).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from memlane.integrations._base import REMEMBER_DOC, Door, require

VERSION = require("pydantic-ai-slim", "2.0", "3", "pydantic-ai")

from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.messages import InstructionPart, ModelMessage, UserPromptPart  # noqa: E402
from pydantic_ai.models import ModelRequestContext  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

__all__ = ["MemlaneCapability"]


def _pairs(messages: Iterable[ModelMessage]) -> Iterable[tuple[str, str]]:
    for message in messages:
        for part in getattr(message, "parts", ()):
            if isinstance(part, UserPromptPart):
                content = part.content
                text = content if isinstance(content, str) else " ".join(
                    c for c in content if isinstance(c, str)
                )  # fmt: skip
                yield "user", text


class MemlaneCapability(AbstractCapability[Any]):
    """Memories in every model request of a Pydantic AI run, decided once per user turn.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        owner, project, agent: the scope when the run's ``deps`` name none.
        session: the session when the run has no ``conversation_id``.
        remember: add the ``remember`` tool.
        token: ``memlane serve``'s bearer token (with a URL).
    """

    def __init__(
        self,
        memory: Any,
        *,
        owner: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        remember: bool = True,
        token: str | None = None,
    ) -> None:
        hint = "pass conversation_id= to agent.run, or MemlaneCapability(session=...)"
        self.door = Door(
            memory, owner=owner, project=project, agent=agent, session=session, token=token,
            source="pydantic-ai", hint=hint,
        )  # fmt: skip
        self.remember = remember

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        pairs = _pairs(request_context.messages)
        text = await self.door.atext(pairs, session=ctx.conversation_id, context=ctx.deps)
        if text is None:
            return request_context
        params = request_context.model_request_parameters
        parts = [*(params.instruction_parts or []), InstructionPart(text, dynamic=True)]
        return dataclasses.replace(
            request_context,
            model_request_parameters=dataclasses.replace(params, instruction_parts=parts),
        )

    def get_toolset(self) -> Any:
        if not self.remember:
            return None
        door = self.door

        async def remember(ctx: RunContext[Any], content: str) -> str:
            return await door.aremember(content, session=ctx.conversation_id, context=ctx.deps)

        remember.__doc__ = REMEMBER_DOC
        return FunctionToolset([remember])
