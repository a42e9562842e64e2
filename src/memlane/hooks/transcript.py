"""The last messages of a client's transcript, to enrich a short follow-up prompt.

Claude Code writes the session as JSONL, one event a line, the message under ``"message"``
(``{"role": "user"|"assistant", "content": str | [parts]}``); Gemini CLI writes one JSON
document with a ``messages`` list. The file is written while the session runs (it may lag a turn
or end in a half-written line): only its tail is read, and any line that is not a whole JSON
message is skipped. Tool calls and results carry no text and are skipped; injected
``[Context from memory]`` blocks are never returned (they would search for what was injected).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any

#: Bytes read from the end of the transcript (a few recent exchanges fit many times over).
TAIL_BYTES = 256 * 1024
#: Characters kept of each message (the engine clips again to ``recent_chars``).
MESSAGE_CHARS = 2_000
#: Roles read, with the role names Gemini CLI uses mapped to these.
_ROLES = {"user": "user", "assistant": "assistant", "model": "assistant", "gemini": "assistant"}
#: First line of an injected block (``memlane.history.INJECTION_BLOCK_PREFIX``; copied so that
#: the hook's fast path stays free of memlane's other modules; a test checks they are equal).
INJECTION_PREFIX = "[Context from memory]"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type", "text") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return "\n".join(parts)
    return ""


def _message(obj: Any) -> tuple[str, str] | None:
    """``(role, text)`` of one transcript entry, or ``None`` when it carries no message text."""
    if not isinstance(obj, Mapping):
        return None
    inner = obj.get("message")
    if isinstance(inner, Mapping):
        obj = inner
    role = _ROLES.get(str(obj.get("role") or obj.get("type") or ""))
    if role is None:
        return None
    text = _text(obj.get("content")).strip()
    if not text or text.startswith(INJECTION_PREFIX):
        return None
    return role, text[:MESSAGE_CHARS]


def _entries(raw: str, whole_file: bool) -> list[Any]:
    lines = raw.splitlines()
    if not whole_file and lines:
        lines = lines[1:]  # the read began inside a line
    entries: list[Any] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue  # half-written, or not JSON: skipped
    if whole_file and not entries:  # one pretty-printed JSON document (Gemini CLI)
        try:
            data = json.loads(raw)
        except ValueError:
            return []
        messages = data.get("messages") if isinstance(data, Mapping) else data
        return messages if isinstance(messages, list) else []
    return entries


def recent_messages(path: str | None, count: int, *, prompt: str = "") -> list[str]:
    """The last ``count`` messages of the transcript at ``path``, oldest first, each as
    ``"user: ..."`` / ``"assistant: ..."``. The current ``prompt``, when the transcript
    already holds it as its last message, is left out. A missing, unreadable or malformed file
    gives ``[]`` (never raises)."""
    if not path or count <= 0:
        return []
    try:
        p = Path(path)
        size = p.stat().st_size
        with p.open("rb") as fh:
            if size > TAIL_BYTES:
                fh.seek(size - TAIL_BYTES)
            raw = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    messages = [m for m in map(_message, _entries(raw, size <= TAIL_BYTES)) if m is not None]
    if messages and messages[-1] == ("user", prompt.strip()[:MESSAGE_CHARS]):
        messages.pop()
    return [f"{role}: {text}" for role, text in messages[-count:]]
