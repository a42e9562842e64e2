"""The turn model over one proxied request (:meth:`memlane.MemoryEngine.turn`, ``kept=False``):
which session and owner it belongs to, which user turn is new, and where every block goes.

- **Who**: ``X-Memlane-Session`` / ``X-Memlane-Owner`` / ``X-Memlane-Agent`` /
  ``X-Memlane-Project`` when the client sends them; without a session, a fingerprint of the
  conversation: ``proxy-`` + 16 hex of SHA-256 over (upstream name, system prompt, first user
  message), stable for the whole conversation (two conversations that open with the same system
  prompt and the same first message share a session: send ``X-Memlane-Session`` to tell them
  apart).
- **The turn**: the last user turn (tool results are not user turns); ``position``: the user
  turns the request holds. A request that only adds a tool result is the same turn: the same
  blocks, no new decision. A shorter history resets (client-side compaction).
- **Placement**: this turn's block in the last user turn's message; each earlier turn's block
  back in its own turn's message (``TurnBlock.position``), the same bytes as when it was first
  sent: the request's prefix stays byte-identical from one turn to the next.
- **Chains** (Responses API ``previous_response_id`` / ``conversation``): the upstream keeps the
  conversation, blocks included, so the turn is ``kept=True`` and only the new turn's block is
  added; the session follows the chain (:class:`Chains`: response id -> session, learned from
  the upstream's answers).
- A request already holding a memlane block (the client runs memlane's hooks) is left alone.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memlane.engine import MemoryEngine
from memlane.proxy.styles import RESPONSES, Style

#: Headers naming memlane's scope (never forwarded upstream).
SESSION, OWNER, AGENT, PROJECT = (
    "x-memlane-session",
    "x-memlane-owner",
    "x-memlane-agent",
    "x-memlane-project",
)


@dataclass(frozen=True)
class Added:
    """What :func:`add_memory` did to one request: ``session``, the turn's ``key`` digest,
    ``repeat``, the blocks placed (``blocks``: earlier + this turn's) and ``reset``."""

    session: str
    key: str
    repeat: bool
    blocks: int
    reset: str | None = None


class Chains:
    """Response id -> (session, owner) of the Responses API chains the proxy has seen (the
    newest ``size``; a proxy restart forgets them: the chain's next turn starts a session)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._ids: OrderedDict[str, str] = OrderedDict()

    def get(self, response_id: str) -> str | None:
        return self._ids.get(response_id)

    def add(self, response_id: str, session: str) -> None:
        self._ids[response_id] = session
        self._ids.move_to_end(response_id)
        while len(self._ids) > self.size:
            self._ids.popitem(last=False)


def fingerprint(upstream: str, system: str, first: str) -> str:
    """The session of a conversation without ``X-Memlane-Session`` (see the module docstring)."""
    raw = "\x1f".join(("memlane-proxy-1", upstream, system, first)).encode("utf-8")
    return "proxy-" + hashlib.sha256(raw).hexdigest()[:16]


def add_memory(
    engine: MemoryEngine,
    style: Style,
    body: dict[str, Any],
    headers: Mapping[str, str],
    upstream: str,
    chains: Chains,
) -> Added | None:
    """Put memory into ``body`` in place (see the module docstring); ``None`` when the request
    holds no user turn to decide (a chain's tool-result continuation, no text). Raises what
    :meth:`MemoryEngine.turn` raises (the caller forwards the request without memory)."""
    turns = style.user_turns(body)
    owner, agent, project = headers.get(OWNER), headers.get(AGENT), headers.get(PROJECT)
    chain = _chain(body) if style is RESPONSES else None
    if chain is not None:
        session = headers.get(SESSION) or chains.get(chain) or chain
        message = style.text(turns[-1]) if turns else ""
        if not _is_last_user_turn(style, body) or not message.strip():
            # a continuation: the upstream holds the turn's block already
            return Added(session, "", True, 0)
        turn = engine.turn(session, message, kept=True, owner=owner, agent=agent, project=project)
        if turn.block and not turn.repeat:
            style.place(turns[-1], turn.block)
        return Added(session, turn.key, turn.repeat, int(bool(turn.block and not turn.repeat)))
    if not turns:
        return None
    message = style.text(turns[-1])
    if not message.strip():
        return None
    session = headers.get(SESSION) or fingerprint(
        upstream, style.system(body), style.text(turns[0])
    )
    position = len(turns)
    turn = engine.turn(
        session, message, kept=False, position=position, owner=owner, agent=agent,
        project=project,
    )  # fmt: skip
    placed = 0
    for earlier in turn.earlier:
        if earlier.position is not None and 1 <= earlier.position < position:
            style.place(turns[earlier.position - 1], earlier.block)
            placed += 1
    if turn.block:
        style.place(turns[-1], turn.block)
        placed += 1
    return Added(session, turn.key, turn.repeat, placed, turn.reset)


def _chain(body: Mapping[str, Any]) -> str | None:
    """The chain a Responses request continues: its ``previous_response_id``, or its
    ``conversation`` (an id, or an object with one)."""
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and previous:
        return previous
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        return "conversation:" + conversation
    return None


def _is_last_user_turn(style: Style, body: Mapping[str, Any]) -> bool:
    """True when the request's newest input item is a user turn (not a tool's output)."""
    items = body.get(style.field)
    return isinstance(items, str) or (
        isinstance(items, list) and bool(items) and style.is_user_turn(items[-1])
    )
