"""The client every framework adapter talks through (:class:`Memlane`): the same calls on an
in-process :class:`~memlane.MemoryEngine` or on a ``memlane serve`` URL, answering the JSON forms
(``to_dict()``) of the engine's results; and the two values it speaks in, :class:`Scope` (whose
memories) and :class:`TurnView` (one model call's answer from the turn model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.engine import MemoryEngine

__all__ = [
    "OWNER_KEYS",
    "SESSION_KEYS",
    "EngineClient",
    "HttpClient",
    "IntegrationError",
    "Memlane",
    "Scope",
    "TurnView",
    "connect",
    "named",
]


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memories an adapter reads and writes: ``owner`` (``None``: memlane's scope rule),
    ``project`` (``None``: every memory of the owner is read, writes are global) and ``agent``
    (``None``: no agent narrowing)."""

    owner: str | None = None
    project: str | None = None
    agent: str | None = None

    def merged(self, **names: str | None) -> Scope:
        """This scope with the names a call gives (a ``None`` keeps this scope's value)."""
        return Scope(
            names.get("owner") or self.owner,
            names.get("project") or self.project,
            names.get("agent") or self.agent,
        )

    def of(self, context: object) -> Scope:
        """This scope with what a run's ``context`` (a mapping or an object) names: the owner
        from :data:`OWNER_KEYS`, ``project``, ``agent``; ``None`` keeps this scope."""
        if context is None:
            return self
        return self.merged(
            owner=named(context, *OWNER_KEYS),
            project=named(context, "project"),
            agent=named(context, "agent"),
        )


#: Keys of a run's context read as the owner, in order (LangGraph's and ADK's ``user_id``).
OWNER_KEYS = ("user_id", "owner")
#: Keys of a run's context read as the session, in order.
SESSION_KEYS = ("session_id", "thread_id", "session")


def named(context: object, *keys: str) -> str | None:
    """The first of ``keys`` that ``context`` (a mapping or an object) names, as text."""
    for key in keys:
        value = context.get(key) if isinstance(context, Mapping) else getattr(context, key, None)
        if value:
            return str(value)
    return None


@dataclass(frozen=True, slots=True)
class TurnView:
    """One model call's answer from the turn model (``Turn.to_dict()``'s fields an adapter needs).

    ``key``: the turn's digest; ``repeat``: a later call of an already decided turn; ``block``:
    this turn's block; ``earlier``: for a door that does not keep the text, the earlier turns'
    blocks still within the window (oldest first); ``ids``: this turn's memory ids.
    """

    key: str
    repeat: bool
    block: str | None
    earlier: tuple[str, ...]
    ids: tuple[str, ...]

    @classmethod
    def of(cls, turn: Mapping[str, Any]) -> TurnView:
        return cls(
            key=str(turn["key"]),
            repeat=bool(turn["repeat"]),
            block=turn.get("block"),
            earlier=tuple(str(b["block"]) for b in turn.get("earlier") or ()),
            ids=tuple(str(i["memory"]["id"]) for i in turn.get("items") or ()),
        )

    @property
    def text(self) -> str | None:
        """What the model call gets: the earlier blocks, then this turn's (``None``: nothing).
        A memory is in at most one of them, so a request holding this once holds no copy."""
        parts = [*self.earlier, *([self.block] if self.block else [])]
        return "\n\n".join(parts) if parts else None


class Memlane:
    """The client every adapter talks through: the same calls on an in-process
    :class:`~memlane.MemoryEngine` (:class:`EngineClient`) or a ``memlane serve`` URL
    (:class:`HttpClient`), each answering the JSON forms (``to_dict()``) of the engine's results.
    The ``a``-prefixed calls run the same in a worker thread (for async frameworks)."""

    def turn(
        self,
        session: str,
        message: str,
        *,
        kept: bool,
        scope: Scope,
        position: int | None = None,
        key: str | None = None,
        known: tuple[str, ...] = (),
    ) -> TurnView:
        """One model call's turn (:meth:`MemoryEngine.turn`; ``known``: ids of memories the
        conversation holds, never injected again)."""
        raise NotImplementedError

    def add(
        self, content: str, *, scope: Scope, session: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Offer a memory to the write path; ``fields``: ``type``, ``metadata``, ``source``,
        ``importance``. The write's ``to_dict()`` (``decision``, ``duplicate``, ``memory``)."""
        raise NotImplementedError

    def update(self, memory_id: str, content: str, *, scope: Scope) -> dict[str, Any]:
        raise NotImplementedError

    def learn(
        self, messages: list[dict[str, str]], *, scope: Scope, session: str | None = None
    ) -> list[dict[str, Any]]:
        """Memories the configured LLM extracts from ``messages`` (``{"role", "content"}``),
        through the write path (:meth:`MemoryEngine.learn`: with a session, only the messages
        not learned before); each write's ``to_dict()``. Over HTTP the project is not sent
        (``POST /v1/learn`` takes none: the memories are global)."""
        raise NotImplementedError

    def search(self, query: str, *, scope: Scope, limit: int = 10) -> list[dict[str, Any]]:
        """Hybrid search hits (``memory``, ``score``, ``similarity``, ``ranks``)."""
        raise NotImplementedError

    def memories(self, *, scope: Scope, limit: int = 100) -> list[dict[str, Any]]:
        """Active memories of the scope, newest first."""
        raise NotImplementedError

    def forget(self, memory_id: str, *, scope: Scope) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the client holds (not the engine it was given)."""

    async def aturn(self, session: str, message: str, **kw: Any) -> TurnView:
        return await asyncio.to_thread(self.turn, session, message, **kw)

    async def alearn(self, messages: list[dict[str, str]], **kw: Any) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.learn, messages, **kw)

    async def aadd(self, content: str, **kw: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.add, content, **kw)

    async def asearch(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.search, query, **kw)


class EngineClient(Memlane):
    """:class:`Memlane` on an engine in this process (closing the client leaves it open)."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def turn(
        self,
        session: str,
        message: str,
        *,
        kept: bool,
        scope: Scope,
        position: int | None = None,
        key: str | None = None,
        known: tuple[str, ...] = (),
    ) -> TurnView:
        done = self.engine.turn(
            session, message, kept=kept, position=position, key=key, known=known,
            owner=scope.owner, agent=scope.agent, project=scope.project,
        )  # fmt: skip
        return TurnView.of(done.to_dict())

    def add(
        self, content: str, *, scope: Scope, session: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        done = self.engine.add(
            content, owner=scope.owner, agent=scope.agent, project=scope.project,
            session=session, **fields,
        )  # fmt: skip
        return done.to_dict()

    def learn(
        self, messages: list[dict[str, str]], *, scope: Scope, session: str | None = None
    ) -> list[dict[str, Any]]:
        done = self.engine.learn(
            messages, owner=scope.owner, agent=scope.agent, project=scope.project, session=session
        )
        return [r.to_dict() for r in done]

    def update(self, memory_id: str, content: str, *, scope: Scope) -> dict[str, Any]:
        return self.engine.update(
            memory_id, content, owner=scope.owner, agent=scope.agent
        ).to_dict()

    def search(self, query: str, *, scope: Scope, limit: int = 10) -> list[dict[str, Any]]:
        hits = self.engine.search(
            query, owner=scope.owner, agent=scope.agent, project=scope.project, limit=limit
        )
        return [h.to_dict() for h in hits]

    def memories(self, *, scope: Scope, limit: int = 100) -> list[dict[str, Any]]:
        rows = self.engine.list(
            owner=scope.owner, agent=scope.agent, project=scope.project, limit=limit
        )
        return [m.to_dict() for m in rows]

    def forget(self, memory_id: str, *, scope: Scope) -> dict[str, Any]:
        return self.engine.forget(memory_id, owner=scope.owner, agent=scope.agent).to_dict()


class IntegrationError(RuntimeError):
    """``memlane serve`` refused a call: the message holds its status and answer."""


class HttpClient(Memlane):
    """:class:`Memlane` on ``memlane serve`` at ``url`` (``token``: its bearer token, when the
    server asks for one). Needs httpx (the ``server`` extra; every framework extra brings it)."""

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 30.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            base_url=url.rstrip("/") + "/v1", headers=headers, timeout=timeout_s
        )

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        answer = self.http.request(method, path, **kw)
        if answer.status_code >= 400:
            raise IntegrationError(
                f"memlane serve: {method} {path} answered {answer.status_code}: {answer.text}"
            )
        return answer.json()

    @staticmethod
    def _names(scope: Scope) -> dict[str, str]:
        named = {"owner": scope.owner, "agent": scope.agent, "project": scope.project}
        return {k: v for k, v in named.items() if v is not None}

    def turn(
        self,
        session: str,
        message: str,
        *,
        kept: bool,
        scope: Scope,
        position: int | None = None,
        key: str | None = None,
        known: tuple[str, ...] = (),
    ) -> TurnView:
        body = {"session": session, "message": message, "kept": kept, **self._names(scope)}
        body |= {k: v for k, v in (("position", position), ("key", key)) if v is not None}
        if known:
            body["known"] = list(known)
        return TurnView.of(self._call("POST", "/turn", json=body))

    def add(
        self, content: str, *, scope: Scope, session: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        names = self._names(scope)
        memory = {"content": content, **fields, **({"session": session} if session else {})}
        if "agent" in names:
            memory["agent"] = names.pop("agent")
        answer = self._call("POST", "/memories", json={**names, "memory": memory})
        return dict(answer["results"][0])

    def learn(
        self, messages: list[dict[str, str]], *, scope: Scope, session: str | None = None
    ) -> list[dict[str, Any]]:
        names = {k: v for k, v in self._names(scope).items() if k != "project"}
        body = {"messages": messages, **names, **({"session": session} if session else {})}
        return list(self._call("POST", "/learn", json=body))

    def update(self, memory_id: str, content: str, *, scope: Scope) -> dict[str, Any]:
        params = {k: v for k, v in self._names(scope).items() if k != "project"}
        return dict(
            self._call("PATCH", f"/memories/{memory_id}", params=params, json={"content": content})
        )

    def search(self, query: str, *, scope: Scope, limit: int = 10) -> list[dict[str, Any]]:
        answer = self._call(
            "POST", "/search", json={"query": query, "limit": limit, **self._names(scope)}
        )
        return list(answer["hits"])

    def memories(self, *, scope: Scope, limit: int = 100) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        params: dict[str, Any] = {**self._names(scope), "limit": min(limit, 200)}
        while len(rows) < limit:
            page = self._call("GET", "/memories", params=params)
            rows.extend(page["items"])
            if not page.get("next_cursor"):
                break
            params["cursor"] = page["next_cursor"]
        return rows[:limit]

    def forget(self, memory_id: str, *, scope: Scope) -> dict[str, Any]:
        params = {k: v for k, v in self._names(scope).items() if k != "project"}
        return dict(self._call("DELETE", f"/memories/{memory_id}", params=params))

    def close(self) -> None:
        self.http.close()


def connect(target: MemoryEngine | Memlane | str, *, token: str | None = None) -> Memlane:
    """The client for ``target``: an engine in this process, a ``memlane serve`` URL
    (``http://127.0.0.1:8765``), or a client already made (returned as it is).

    Raises:
        TypeError: ``target`` is none of those.
    """
    if isinstance(target, Memlane):
        return target
    if isinstance(target, str):
        return HttpClient(target, token=token)
    from memlane.engine import MemoryEngine

    if isinstance(target, MemoryEngine):
        return EngineClient(target)
    raise TypeError(
        f"memory must be a MemoryEngine, a memlane serve URL or a client, got {type(target).__name__}"
    )
