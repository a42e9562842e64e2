"""Structured output that real servers accept: which form to ask an endpoint for, and reading the
JSON out of whatever came back.

Servers differ: OpenAI, vLLM, Ollama and llama.cpp's ``llama-server`` take ``response_format``
``json_schema``; llama-cpp-python's server takes only ``text`` or ``json_object`` (with the
schema as ``schema``) and answers 500 ``Input should be 'text' or 'json_object'``; some take no
``response_format`` at all. Anthropic's messages API takes tools (a forced ``tool_use`` whose
``input`` is the answer); a compatible server may refuse tools or an assistant prefill.

So each provider has an ordered list of *forms* (:data:`OPENAI_FORMS`, :data:`ANTHROPIC_FORMS`),
strongest first. :class:`FormNegotiator` remembers, per endpoint (provider and base URL), the
form in use: a call whose request the server refuses *because of the form* (:func:`refusal`)
moves that endpoint to the next form for good (the reason kept, logged and shown by
``memlane llm check``), and the call is sent again in that form. Every answer, whatever the
form, is validated against the schema with pydantic by the caller: a weaker form costs
reliability, never correctness.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("memlane.llm")

#: The OpenAI chat-completions forms, strongest first: ``response_format`` ``json_schema``;
#: ``json_object`` (the schema also in the prompt, and as ``schema``, which llama-cpp-python turns
#: into a grammar); no ``response_format`` (the schema in the prompt, the JSON read out of the
#: text by :func:`json_text`).
OPENAI_FORMS = ("json_schema", "json_object", "text")
#: The Anthropic messages forms: a forced tool call; the answer prefilled with ``{``; plain text.
ANTHROPIC_FORMS = ("tool_use", "prefill", "text")

#: Words in a refusal that show it is about the form asked for (lower case), per form.
_FORM_WORDS = {
    "json_schema": ("response_format", "json_schema"),
    "json_object": ("response_format", "json_object"),
    "tool_use": ("tool",),
    "prefill": ("prefill", "assistant", "final message"),
}
#: HTTP statuses with which servers refuse a request's shape (llama-cpp-python uses 500).
_REFUSAL_STATUSES = {400, 404, 415, 422, 500, 501}


def server_message(exc: BaseException) -> str:
    """The message a server sent with its HTTP error (the SDK's ``body``: ``error.message``,
    ``message`` or ``detail``), else the exception's text; one line, at most 300 characters."""
    found = _message_in(getattr(exc, "body", None))
    text = found if found else str(exc)
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."


def _message_in(body: Any) -> str | None:
    if isinstance(body, str):
        return body or None
    if isinstance(body, dict):
        for key in ("error", "message", "detail", "msg"):
            if key in body:
                found = _message_in(body[key])
                if found:
                    return found
    if isinstance(body, list) and body:
        parts = [m for m in (_message_in(b) for b in body) if m]
        return "; ".join(parts) or None
    return None


def refusal(exc: BaseException, form: str) -> str | None:
    """The server's message when ``exc`` is an HTTP error refusing ``form`` (its status is one
    servers refuse a request's shape with, and its message names the form's parameter), else
    ``None`` (a real error, reported as it is)."""
    status = getattr(exc, "status_code", None)
    if status not in _REFUSAL_STATUSES or form not in _FORM_WORDS:
        return None
    message = server_message(exc)
    low = message.lower()
    return message if any(word in low for word in _FORM_WORDS[form]) else None


@dataclass(frozen=True, slots=True)
class FormChange:
    """One endpoint's move to a weaker form: from what, to what, and the server's words."""

    endpoint: str
    refused: str
    now: str
    message: str

    def line(self) -> str:
        """``the server rejected response_format json_schema: <its message>; asking with
        json_object from now on`` (one line)."""
        what = {
            "json_schema": "response_format json_schema",
            "json_object": "response_format json_object",
            "tool_use": "tool use",
            "prefill": "an assistant prefill",
        }.get(self.refused, self.refused)
        return (
            f"the server at {self.endpoint} rejected {what}: {self.message}; "
            f"asking with {self.now} from now on"
        )


class FormNegotiator:
    """The form each endpoint is asked in (thread-safe, one per process and provider kind, so
    every provider object for the same server shares what was learned)."""

    def __init__(self, forms: tuple[str, ...]) -> None:
        self.forms = forms
        self._lock = threading.Lock()
        self._now: dict[str, int] = {}
        self._changes: dict[str, list[FormChange]] = {}

    def form(self, endpoint: str) -> str:
        """The form ``endpoint`` is asked in now (the strongest until one is refused)."""
        with self._lock:
            return self.forms[self._now.get(endpoint, 0)]

    def refused(self, endpoint: str, form: str, message: str) -> str | None:
        """``endpoint`` refused ``form`` with ``message``: move it to the next form and return
        that form, or ``None`` when ``form`` was the last (the refusal is then a real error)."""
        with self._lock:
            at = self._now.get(endpoint, 0)
            if self.forms[at] != form:  # another thread already moved on
                return self.forms[at]
            if at + 1 >= len(self.forms):
                return None
            self._now[endpoint] = at + 1
            change = FormChange(endpoint, form, self.forms[at + 1], message)
            self._changes.setdefault(endpoint, []).append(change)
        log.warning("llm: %s", change.line())
        return change.now

    def changes(self, endpoint: str) -> list[FormChange]:
        """The moves ``endpoint`` made, oldest first."""
        with self._lock:
            return list(self._changes.get(endpoint, []))


def json_text(text: str) -> str:
    """The first JSON object in ``text`` (a model's answer): prose, code fences and anything after
    the object are dropped; ``text`` unchanged when it holds none (pydantic then says why)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return text[start:end]
        start = text.find("{", end)
    return text


def without_lengths(schema: Any) -> Any:
    """``schema`` without its ``maxLength`` / ``maxItems`` / ``minLength`` limits: llama.cpp
    cannot compile a grammar from ``maxLength: 2000``, and pydantic checks every answer anyway."""
    if isinstance(schema, dict):
        drop = {"maxLength", "maxItems", "minLength"}
        return {k: without_lengths(v) for k, v in schema.items() if k not in drop}
    if isinstance(schema, list):
        return [without_lengths(v) for v in schema]
    return schema


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its local ``$ref``s (``#/$defs/Name``) replaced by the definitions and
    ``$defs`` dropped: what a model reads in its prompt (SmolLM2-135M copied ``#/$defs/...``
    into its answers as memory text). Definitions are not recursive in memlane's schemas."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.rsplit("/", 1)[1]])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: dict[str, Any] = walk(schema)
    return out


def with_schema(system: str, schema: dict[str, Any]) -> str:
    """``system`` with the answer's JSON schema appended, references inlined (forms that do not
    carry the schema, and ``json_object``, whose grammar a model does not see)."""
    compact = json.dumps(inlined(schema), separators=(",", ":"))
    return f"{system}\nThe JSON object must match this JSON schema: {compact}"
