"""What the proxy needs to know of each API style's request body: its user turns (the messages a
person wrote, not tool results), their text, where a block goes, the system prompt, and the
paths it forwards. One :class:`Style` per API: :data:`CHAT` (OpenAI chat completions),
:data:`RESPONSES` (OpenAI Responses), :data:`MESSAGES` (Anthropic Messages).

A block goes before the user's own text in the same message: a string content becomes
``block + "\\n\\n" + text``; a list of parts gets a text part first. Each earlier turn's block goes
back into that turn's message exactly so, which keeps the request's prefix byte-identical from
one turn to the next (:mod:`memlane.proxy.memory`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: A user turn: the container (a list, or the body for the Responses API's string ``input``)
#: and the key of the message (or of the string) in it.
Ref = tuple[Any, Any]


@dataclass(frozen=True)
class Style:
    """One API's request shapes (see the module docstring)."""

    name: str
    #: The field holding the conversation (``messages`` / ``input``).
    field: str
    #: The type of a text part in a user message (``text`` / ``input_text``).
    text_part: str
    #: Part types that make a user message a tool result, not a person's turn.
    tool_parts: frozenset[str]

    def user_turns(self, body: dict[str, Any]) -> list[Ref]:
        """The user turns of ``body``'s conversation, oldest first."""
        items = body.get(self.field)
        if isinstance(items, str):  # the Responses API's one-message input
            return [(body, self.field)]
        if not isinstance(items, list):
            return []
        return [(items, i) for i, m in enumerate(items) if self.is_user_turn(m)]

    def is_user_turn(self, message: Any) -> bool:
        if not isinstance(message, dict) or message.get("role") != "user":
            return False
        if message.get("type", "message") != "message":
            return False
        content = message.get("content")
        if isinstance(content, str):
            return True
        if not isinstance(content, list):
            return False
        return any(not (isinstance(p, dict) and p.get("type") in self.tool_parts) for p in content)

    def text(self, ref: Ref) -> str:
        """The text a person wrote in the turn (its text parts joined by newlines)."""
        container, key = ref
        value = container[key]
        if isinstance(value, str):
            return value
        content = value.get("content")
        if isinstance(content, str):
            return content
        parts = [
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and p.get("type") in (self.text_part, "text", "input_text")
        ]
        return "\n".join(t for t in parts if isinstance(t, str))

    def place(self, ref: Ref, block: str) -> None:
        """Put ``block`` before the turn's own text (see the module docstring)."""
        container, key = ref
        value = container[key]
        if isinstance(value, str):
            container[key] = f"{block}\n\n{value}"
            return
        content = value.get("content")
        if isinstance(content, str):
            value["content"] = f"{block}\n\n{content}"
        else:
            value["content"] = [{"type": self.text_part, "text": block}, *content]

    def system(self, body: dict[str, Any]) -> str:
        """The system prompt's text (``""`` when none): the first system/developer message
        (chat), ``instructions`` (Responses), ``system`` (Messages)."""
        if self.name == "messages":
            value: Any = body.get("system")
        elif self.name == "responses":
            value = body.get("instructions")
        else:
            value = next(
                (
                    m.get("content")
                    for m in body.get("messages") or []
                    if isinstance(m, dict) and m.get("role") in ("system", "developer")
                ),
                None,
            )
        if isinstance(value, list):
            value = "\n".join(
                str(p.get("text", "")) for p in value if isinstance(p, dict) and "text" in p
            )
        return value if isinstance(value, str) else ""


CHAT = Style("chat", "messages", "text", frozenset())
RESPONSES = Style("responses", "input", "input_text", frozenset())
MESSAGES = Style("messages", "messages", "text", frozenset({"tool_result"}))

#: Per API (``[proxy.upstreams.NAME] api``): ``(method, path pattern, style or None)``, the path
#: after the upstream's name; a style marks a route memory is added to, ``None`` a plain
#: pass-through. Anything else is refused (404), nothing forwarded.
ROUTES: dict[str, list[tuple[str, re.Pattern[str], Style | None]]] = {
    "openai": [
        ("POST", re.compile(r"v1/chat/completions"), CHAT),
        ("POST", re.compile(r"v1/responses"), RESPONSES),
        ("GET", re.compile(r"v1/models"), None),
        ("GET", re.compile(r"v1/models/[^/]+"), None),
        ("POST", re.compile(r"v1/responses/input_tokens"), None),
        ("GET", re.compile(r"v1/responses/[^/]+"), None),
        ("DELETE", re.compile(r"v1/responses/[^/]+"), None),
        ("POST", re.compile(r"v1/responses/[^/]+/cancel"), None),
        ("GET", re.compile(r"v1/responses/[^/]+/input_items"), None),
    ],
    "anthropic": [
        ("POST", re.compile(r"v1/messages"), MESSAGES),
        ("POST", re.compile(r"v1/messages/count_tokens"), None),
        ("GET", re.compile(r"v1/models"), None),
        ("GET", re.compile(r"v1/models/[^/]+"), None),
    ],
}

#: The paths of each API, for the refusal's message.
API_PATHS = {
    "openai": "v1/chat/completions, v1/responses (and its ids), v1/models",
    "anthropic": "v1/messages, v1/messages/count_tokens, v1/models",
}


def route(api: str, method: str, path: str) -> tuple[bool, Style | None, bool]:
    """``(known path, style, method allowed)`` of ``method path`` for ``api``."""
    matched = [(m, style) for m, pattern, style in ROUTES[api] if pattern.fullmatch(path)]
    for m, style in matched:
        if m == method:
            return True, style, True
    return bool(matched), None, False


def upstream_url(api: str, base: str, path: str) -> str:
    """The upstream URL of ``path`` (``v1/...``): OpenAI-style bases hold their ``/v1``
    (``https://api.openai.com/v1``), Anthropic-style ones do not (as the SDKs' ``base_url``)."""
    if api == "openai":
        return f"{base}/{path.removeprefix('v1/')}"
    return f"{base}/{path}"
