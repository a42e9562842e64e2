"""memlane in a LangChain 1.x agent (``create_agent``): :class:`MemlaneMiddleware`.

``wrap_model_call`` runs around every model call of the agent's loop, so a turn that calls tools
makes several. Each call asks the turn model (:meth:`memlane.MemoryEngine.turn`, ``kept=False``:
the text is added to that one request and never stays in the agent's state) and appends
:attr:`TurnView.text` to the request's system message: the first call of a turn decides the
block, the later calls of the same turn get the same text, and a memory shown on an earlier turn
comes back while it is within the window (the history does not hold it).

Ids (docs/frameworks.md): the session is the run's ``thread_id`` (``config={"configurable":
{"thread_id": ...}}``), else ``session=``; the owner is ``user_id`` (or ``owner``) of the run's
context (``context={"user_id": ...}`` or an object with that attribute), else ``owner=``, else
memlane's scope rule; ``project`` and ``agent`` likewise. The middleware also registers a
``remember`` tool (``remember=False`` leaves it out) that offers a memory to the write path in
the same scope; with ``learn=True`` each run's conversation goes to memlane's ``learn`` after the
run (``after_agent``), when memlane has an LLM configured.

Supported: langchain >=1.1,<2 (``create_agent`` middleware with ``ModelRequest.system_message``, which 1.0
lacked).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from memlane.integrations._base import REMEMBER_DOC, Door, require

VERSION = require("langchain", "1.1", "2", "langchain")

from langchain.agents.middleware import AgentMiddleware, ModelRequest  # noqa: E402
from langchain.tools import tool  # noqa: E402
from langchain_core.messages import BaseMessage, SystemMessage  # noqa: E402

__all__ = ["MemlaneMiddleware"]


def _thread_id(config: Mapping[str, Any] | None) -> str | None:
    value = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if value is None else str(value)


def _role(message: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant"}.get(message.type, message.type)


class MemlaneMiddleware(AgentMiddleware):  # type: ignore[misc]
    """Memories in every model call of a ``create_agent`` loop, decided once per user turn.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        owner, project, agent: the scope when the run's context names none.
        session: the session when the run has no ``thread_id``.
        remember: register the ``remember`` tool.
        learn: after each run (``after_agent``), give the conversation to memlane's ``learn``
            (needs an LLM configured in memlane, ``[llm]``; with the session, only the messages
            not learned before are read).
        token: ``memlane serve``'s bearer token (with a URL).

    Raises:
        ValueError: (on a model call) the run has no ``thread_id`` and no ``session`` was given.
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
        learn: bool = False,
        token: str | None = None,
    ) -> None:
        super().__init__()
        self.learn = learn
        hint = "pass config={'configurable': {'thread_id': ...}} to invoke, or session="
        self.door = Door(
            memory, owner=owner, project=project, agent=agent, session=session, token=token,
            source="langchain", hint=hint,
        )  # fmt: skip
        self.tools = [self._remember_tool()] if remember else []

    @staticmethod
    def _request(request: ModelRequest, text: str | None) -> ModelRequest:
        if text is None:
            return request
        system = request.system_message
        before = system.text if system is not None else ""
        joined = f"{before}\n\n{text}" if before else text
        return request.override(system_message=SystemMessage(content=joined))

    @staticmethod
    def _call(request: ModelRequest) -> dict[str, Any]:
        from langgraph.config import get_config

        return {
            "pairs": [(_role(m), m.text) for m in request.messages],
            "session": _thread_id(get_config()),
            "context": request.runtime.context if request.runtime else None,
        }

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        return handler(self._request(request, self.door.text(**self._call(request))))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        text = await self.door.atext(**self._call(request))
        return await handler(self._request(request, text))

    def after_agent(self, state: Any, runtime: Any) -> None:
        if self.learn:
            from langgraph.config import get_config

            self.door.learn(
                [(_role(m), m.text) for m in state["messages"]],
                session=_thread_id(get_config()),
                context=runtime.context,
            )

    def _remember_tool(self) -> Any:
        door = self.door

        def remember(content: str) -> str:
            from langgraph.config import get_config
            from langgraph.runtime import get_runtime

            config = get_config()
            return door.remember(content, session=_thread_id(config), context=get_runtime().context)

        remember.__doc__ = REMEMBER_DOC
        return tool(remember)
