"""memlane in CrewAI 1.x agents and crews: :class:`MemlaneHooks`.

CrewAI calls its ``before_llm_call`` hooks before every model call of an agent's loop, with the
executor's own message list, which a hook edits in place: the edit stays in that list for the
later calls of the same run (the tool loop), and every new run (each ``Crew.kickoff`` task,
each ``Agent.kickoff``) rebuilds the list from its prompt, so nothing is kept across turns.
The hook asks the turn model (:meth:`memlane.MemoryEngine.turn`, ``kept=False``: the next turn's
messages will not hold it) once per run and appends :attr:`TurnView.text` to the run's system
message; the later calls of the run find it there and add nothing, so every call of the run holds
the same block exactly once, and the memories an earlier turn showed come back while they are
within the window. A history passed back to ``Agent.kickoff`` (``out.messages + [...]``) holds
the earlier runs' edited system message: the hook removes that earlier memlane text from the new
run's messages before it adds this run's, so no request holds a memory twice.

Ids (docs/frameworks.md): a run is one executor run (its own turn key, so the same question
asked in a new kickoff is a new turn); the turn's message is the task's description (the
kickoff's ``inputs`` interpolated into it), else the last user message (``Agent.kickoff``).
The session is ``session_id`` / ``thread_id`` / ``session`` of the kickoff's ``inputs``, else
``session=``, else the crew's id (the same for every kickoff of one ``Crew`` object), else the
agent's; the owner is ``user_id`` (or ``owner``) of the inputs, else ``owner=``, else memlane's
scope rule; ``project`` and ``agent`` likewise. :meth:`MemlaneHooks.remember_tool` is a CrewAI
tool that offers a memory to memlane's write path in the calling run's scope.

CrewAI copies the global hooks into an agent's executor when the executor is made: call
:meth:`MemlaneHooks.register` (or enter ``with MemlaneHooks(...)``) before building the agents.
CrewAI runs hooks fail-open: an error in memlane (a ``memlane serve`` that does not answer) is
logged on the ``memlane.integrations.crewai`` logger and the call goes on without memories.

Supported: crewai >=1.15,<2 (tested with 1.15.30; earlier 1.x releases were not checked).
"""

from __future__ import annotations

import contextvars
import logging
import uuid
import weakref
from collections.abc import Mapping
from typing import Any

from memlane.history import INJECTION_BLOCK_PREFIX
from memlane.integrations._base import REMEMBER_DOC, Door, find_session, require

VERSION = require("crewai", "1.15", "2", "crewai")

from crewai.hooks import (  # noqa: E402
    register_before_llm_call_hook,
    register_before_tool_call_hook,
    unregister_before_llm_call_hook,
    unregister_before_tool_call_hook,
)
from crewai.tools import BaseTool  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

__all__ = ["MemlaneHooks"]

log = logging.getLogger(__name__)

#: The run a ``remember`` call belongs to: ``(session, inputs)``, set by the tool hook just
#: before CrewAI calls the tool, in the same thread and context.
_RUN: contextvars.ContextVar[tuple[str | None, Any] | None] = contextvars.ContextVar(
    "memlane_crewai_run", default=None
)


def _inputs(crew: Any) -> Mapping[str, Any] | None:
    """The kickoff's ``inputs`` (a crew keeps them in its private ``_inputs``)."""
    found = getattr(crew, "_inputs", None) if crew is not None else None
    return found if isinstance(found, Mapping) else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text")) for p in content if isinstance(p, Mapping) and p.get("text")
        )
    return ""


def _never_cache(_args: Any = None, _result: Any = None) -> bool:
    """A ``remember`` call always reaches the write path (a module-level function: CrewAI
    serialises a tool's ``cache_function`` by name for its checkpoints)."""
    return False


def _strip(messages: list[Any]) -> None:
    """Remove the memlane text of earlier runs from a new run's messages, in place.

    ``Agent.kickoff(out.messages + [...])`` passes a run's messages back as the next run's
    history, with the system message this hook edited; this run's text gives back what is
    still within the window (``kept=False``), so a stale copy would show a memory twice.
    """
    marker = "\n\n" + INJECTION_BLOCK_PREFIX
    for message in list(messages):
        content = message.get("content")
        if not isinstance(content, str):
            continue
        if message.get("role") == "system" and content.startswith(INJECTION_BLOCK_PREFIX):
            messages.remove(message)
        elif marker in content:
            message["content"] = content[: content.index(marker)]


class _RememberArgs(BaseModel):
    content: str = Field(description="the fact to remember, one sentence.")


class MemlaneHooks:
    """Memories in every model call of a CrewAI agent's run, decided once per run.

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        owner, project, agent: the scope when the kickoff's ``inputs`` name none.
        session: the session when the inputs name none (else the crew's id).
        token: ``memlane serve``'s bearer token (with a URL).

    Use: ``hooks = MemlaneHooks(engine).register()`` before building the agents (or ``with
    MemlaneHooks(engine):``), ``tools=[hooks.remember_tool()]`` to let an agent write.
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
        hint = "pass inputs={'session_id': ...} to kickoff, or session="
        self.door = Door(
            memory, owner=owner, project=project, agent=agent, session=session, token=token,
            source="crewai", hint=hint,
        )  # fmt: skip
        # executor -> (the first message of its current run, that run's turn key): a new run
        # clears the executor's list and appends new messages, so the first one tells runs apart.
        self._runs: weakref.WeakKeyDictionary[Any, tuple[Any, str]] = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ registration
    def register(self) -> MemlaneHooks:
        """Register the hooks globally (for the agents built afterwards); returns ``self``."""
        register_before_llm_call_hook(self.before_llm_call)
        register_before_tool_call_hook(self.before_tool_call)
        return self

    def unregister(self) -> None:
        """Remove the global hooks (executors already made keep their copy)."""
        unregister_before_llm_call_hook(self.before_llm_call)
        unregister_before_tool_call_hook(self.before_tool_call)

    def __enter__(self) -> MemlaneHooks:
        return self.register()

    def __exit__(self, *exc: object) -> None:
        self.unregister()

    # ------------------------------------------------------------------ the hooks
    def _session(self, crew: Any, agent: Any) -> str | None:
        found = find_session(_inputs(crew) or {}, self.door.session)
        for holder in (crew, agent):  # a kickoff naming none: the crew's (the agent's) id
            if found is None and getattr(holder, "id", None) is not None:
                found = str(holder.id)
        return found

    def _key(self, executor: Any, messages: list[Any]) -> str:
        known = self._runs.get(executor)
        if known is not None and known[0] is messages[0]:
            return known[1]
        _strip(messages)  # a new run: what a history passed back holds of earlier runs
        key = uuid.uuid4().hex
        self._runs[executor] = (messages[0] if messages else None, key)
        return key

    def before_llm_call(self, context: Any) -> None:
        """CrewAI's ``before_llm_call`` hook: the run's memlane text into its system message,
        once (calls outside an agent's executor, such as CrewAI's internal ones, are left)."""
        executor, messages = getattr(context, "executor", None), context.messages
        if executor is None or not messages:
            return
        try:
            task = getattr(context, "task", None)
            pairs = [(str(m.get("role")), _text(m.get("content"))) for m in messages]
            if task is not None and getattr(task, "description", None):
                pairs = [("user", str(task.description))]
            text = self.door.text(
                pairs,
                session=self._session(context.crew, context.agent),
                context=_inputs(context.crew),
                key=self._key(executor, messages),
            )
        except Exception:  # CrewAI swallows a hook's error silently: say it
            log.warning("memlane: no memories for this CrewAI model call", exc_info=True)
            return
        if text:
            self._place(executor, messages, text)

    def _place(self, executor: Any, messages: list[Any], text: str) -> None:
        if any(text in _text(m.get("content")) for m in messages):
            return  # a later call of the run: the first call's edit is still there
        first = messages[0]
        if first.get("role") == "system" and isinstance(first.get("content"), str):
            first["content"] = f"{first['content']}\n\n{text}"
        else:
            messages.insert(0, {"role": "system", "content": text})
            self._runs[executor] = (messages[0], self._runs[executor][1])

    def before_tool_call(self, context: Any) -> None:
        """CrewAI's ``before_tool_call`` hook: the run a ``remember`` call belongs to."""
        _RUN.set((self._session(context.crew, context.agent), _inputs(context.crew)))

    # ------------------------------------------------------------------ writing
    def remember_tool(self) -> BaseTool:
        """A CrewAI tool ``remember(content)`` through memlane's write path (no duplicates,
        secrets redacted, ``<private>`` dropped) in the calling run's scope; its answer says
        what the write did. Never cached (CrewAI caches tool results by their arguments)."""
        door = self.door

        class Remember(BaseTool):  # type: ignore[misc]
            name: str = "remember"
            description: str = REMEMBER_DOC
            args_schema: type[BaseModel] = _RememberArgs

            def _run(self, content: str) -> str:
                session, inputs = _RUN.get() or (None, None)
                return door.remember(content, session=session, context=inputs)

        return Remember(cache_function=_never_cache)
