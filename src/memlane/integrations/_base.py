"""What every framework adapter shares: one client for memlane (an in-process engine or a
``memlane serve`` URL), the scope an adapter passes, the turn's text, the ``remember`` tool's
body and the check that the installed framework has the seam an adapter plugs into.

An adapter is a thin event adapter: it finds, in its framework's own objects, the session, the
owner and the text of the user message that started the turn, calls :meth:`Memlane.turn` (the
one turn model, :mod:`memlane.injection.turn`), and puts :attr:`TurnView.text` where its
framework lets it (a system prompt, a message, a memory block). No injection logic lives here
nor in an adapter: the engine decides what a turn shows, once per turn.

The scope rule (docs/integrations.md): the owner is the one the framework's call names (its user
id), else the one the adapter was built with, else ``None``: memlane's own rule (``[scope]
owner``, else ``default``) decides. An adapter never makes an owner up.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from memlane.integrations._client import (
    OWNER_KEYS,
    SESSION_KEYS,
    Memlane,
    Scope,
    TurnView,
    connect,
    named,
)

__all__ = [
    "OWNER_KEYS",
    "REMEMBER_DOC",
    "SESSION_KEYS",
    "Door",
    "Memlane",
    "Scope",
    "TurnView",
    "UnsupportedFramework",
    "connect",
    "find_session",
    "last_user_turn",
    "named",
    "remember_reply",
    "require",
    "search_limit",
    "session_of",
]


class UnsupportedFramework(ImportError):
    """The installed framework lacks the seam an adapter plugs into (or is not installed); the
    message names the package, the version found and the supported range."""


def require(dist: str, low: str, high: str, extra: str) -> str:
    """The installed version of ``dist`` when it is in ``>=low,<high`` (PEP 440, compared by
    :mod:`packaging`).

    Which versions are in the range:

    - a local version (``1.62.0+abc``, a vendor's own build) counts as its public version
      (``1.62.0``);
    - a pre-release or dev release (``1.60.0rc1``, ``1.60.0.dev3``) inside the range is
      accepted, but one of the lower bound (``1.54.0rc1`` for ``>=1.54``) comes before that
      release and is refused, and so is one of the upper bound (``2.0.0rc1``, ``2.0.0.dev1``
      for ``<2``): the next release's pre-releases already carry its changes;
    - a version that is not PEP 440 (pip has refused to install one since 24.1) is refused.

    Raises:
        UnsupportedFramework: ``dist`` is not installed, or its version is out of the range
            (``pip install 'memlane[EXTRA]'`` installs a supported one).
    """
    supported = f">={low},<{high}"
    fix = f"pip install 'memlane[{extra}]' (supported: {dist} {supported})"
    try:
        found = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise UnsupportedFramework(f"{dist} is not installed; {fix}") from None
    try:
        ok = SpecifierSet(supported).contains(Version(found), prereleases=True)
    except InvalidVersion:
        ok = False
    if not ok:
        raise UnsupportedFramework(
            f"{dist} {found} is not supported: memlane's adapter needs {dist} {supported}; {fix}"
        )
    return found


def search_limit(limit: object, where: str, reader: str) -> int:
    """``limit`` (how many hits an adapter's search returns) when it is a whole number >= 1.

    Raises:
        ValueError: it is not; the message names ``where`` (the adapter's class or call) and
            ``reader`` (the call that returns that many hits).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(
            f"memlane: {where}(limit={limit!r}): limit is how many search hits {reader} "
            "returns; give a whole number of at least 1 (default 10)"
        )
    return limit


def find_session(*sources: object) -> str | None:
    """The first session that ``sources`` name (each a text, a mapping or an object read with
    :data:`SESSION_KEYS`), else ``None`` (a write may have no session)."""
    for source in sources:
        found = source if isinstance(source, str) else named(source, *SESSION_KEYS)
        if found:
            return found
    return None


def session_of(*sources: object, hint: str) -> str:
    """:func:`find_session`, for a turn (which needs one).

    Raises:
        ValueError: none names one; ``hint`` says how to give one.
    """
    found = find_session(*sources)
    if found is None:
        raise ValueError(f"memlane: no session for this run; {hint}")
    return found


def last_user_turn(messages: Iterable[tuple[str, str]]) -> tuple[str, int] | None:
    """``(text of the last user message, how many user messages there are)`` from
    ``(role, text)`` pairs in conversation order (role ``"user"`` for the user's); ``None``
    when there is none (nothing to inject for)."""
    last, count = None, 0
    for role, text in messages:
        if role == "user":
            last, count = text, count + 1
    return None if last is None else (last, count)


def remember_reply(result: Mapping[str, Any]) -> str:
    """The ``remember`` tool's answer to the model, from a write's ``to_dict()``: what the
    write path did (``added``, or the duplicate decision and the memory that holds the text)."""
    memory = result["memory"]
    if result.get("duplicate"):
        return f"Already remembered ({result['decision']}): {memory['content']}"
    return f"Remembered ({result['decision']}, id {memory['id']})."


#: The ``remember`` tool's description, the same in every framework (its ``Args`` section is
#: what Pydantic AI and the Agents SDK read the argument's description from).
REMEMBER_DOC = """Save a fact, preference or decision about the user for later conversations.

Args:
    content: the fact to remember, one sentence.
"""


class Door:
    """What every adapter holds and calls: the client, the adapter's own scope and session, and
    the two things an adapter does with them.

    - :meth:`text` / :meth:`atext`: one model call's memlane text from the conversation's
      ``(role, text)`` pairs, ``None`` when there is no user message or nothing to show;
      :meth:`aview` the whole :class:`TurnView` (a door whose text is kept skips a repeat;
      ``known``: ids of memories its conversation still holds, never injected again).
      ``kept`` (default ``False``: the framework does not keep the text) is the turn model's.
      ``key`` (``text`` only): the framework's own id of the run, which then names the turn
      instead of the user message's position. ``position`` (``aview`` / ``atext``): the turn's
      position when the adapter knows it better than the count of user messages in ``pairs``
      (a framework that trims its history: Strands' conversation managers).
    - :meth:`remember` / :meth:`aremember`: the ``remember`` tool's body (the write path).
    - :meth:`learn`: the conversation's user and assistant messages to memlane's ``learn`` (the
      configured LLM extracts memories; with the session, only what was not learned before).

    ``session`` and ``context`` are what the framework's call gives: a session id or an object /
    mapping naming one (:data:`SESSION_KEYS`), and the run's context (:meth:`Scope.of`); the
    adapter's own ``session`` is used when the call names none, else ``ValueError`` says
    ``hint``. ``source`` marks the memories the adapter writes.
    """

    def __init__(
        self,
        memory: Any,
        *,
        owner: str | None,
        project: str | None,
        agent: str | None,
        session: str | None,
        token: str | None,
        source: str,
        hint: str,
        kept: bool = False,
    ) -> None:
        self.memory: Memlane = connect(memory, token=token)
        self.kept = kept
        self.scope = Scope(owner, project, agent)
        self.session = session
        self.source = source
        self.hint = hint

    def _turn(
        self,
        pairs: Iterable[tuple[str, str]],
        session: object,
        context: object,
        key: str | None = None,
        position: int | None = None,
        known: Iterable[str] = (),
    ) -> Any:
        found = last_user_turn(pairs)
        if found is None:
            return None
        message, position = found[0], position or found[1]
        return {
            "session": session_of(session, self.session, hint=self.hint),
            "message": message,
            "kept": self.kept,
            # A door's own run id names the turn instead of its position (a framework that
            # rebuilds every run's messages from scratch has every user message at position 1).
            "position": None if key else position,
            "key": key,
            "known": tuple(known),
            "scope": self.scope.of(context),
        }

    def text(
        self,
        pairs: Iterable[tuple[str, str]],
        *,
        session: object,
        context: object,
        key: str | None = None,
    ) -> str | None:
        args = self._turn(pairs, session, context, key)
        return None if args is None else self.memory.turn(**args).text

    async def aview(
        self,
        pairs: Iterable[tuple[str, str]],
        *,
        session: object,
        context: object,
        position: int | None = None,
        known: Iterable[str] = (),
    ) -> TurnView | None:
        args = self._turn(pairs, session, context, position=position, known=known)
        return None if args is None else await self.memory.aturn(**args)

    async def atext(
        self,
        pairs: Iterable[tuple[str, str]],
        *,
        session: object,
        context: object,
        position: int | None = None,
    ) -> str | None:
        view = await self.aview(pairs, session=session, context=context, position=position)
        return None if view is None else view.text

    def _write(self, session: object, context: object) -> dict[str, Any]:
        return {
            "scope": self.scope.of(context),
            "session": find_session(session, self.session),
            "source": self.source,
        }

    def remember(self, content: str, *, session: object, context: object) -> str:
        return remember_reply(self.memory.add(content, **self._write(session, context)))

    async def aremember(self, content: str, *, session: object, context: object) -> str:
        return remember_reply(await self.memory.aadd(content, **self._write(session, context)))

    def learn(
        self, pairs: Iterable[tuple[str, str]], *, session: object, context: object
    ) -> list[dict[str, Any]]:
        messages = [
            {"role": role, "content": text}
            for role, text in pairs
            if role in ("user", "assistant") and text
        ]
        if not messages:
            return []
        write = self._write(session, context)
        return self.memory.learn(messages, scope=write["scope"], session=write["session"])
