"""Learning from conversations: reading transcripts and turning a model's extraction into the
write path's batch (:meth:`memlane.MemoryEngine.learn`).

Transcript formats read by :func:`read_transcript`:

- OpenAI-style JSON: a list of ``{"role", "content"}`` messages, or ``{"messages": [...]}``;
- JSONL: one such message a line;
- Claude Code transcript JSONL: one event a line, the message under ``"message"`` (events
  without a user/assistant message, such as summaries, are skipped).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memlane.dedup.write import MemoryInput
from memlane.errors import InvalidArgument
from memlane.history import is_injection_text, message_text, render_transcript
from memlane.llm import ExtractedMemory
from memlane.privacy import for_llm
from memlane.types import MemoryType

__all__ = ["conversation_text", "read_transcript", "to_inputs"]

_ROLES = frozenset({"user", "assistant", "system"})
_TYPES = frozenset(t.value for t in MemoryType)


def _as_message(obj: object) -> dict[str, Any] | None:
    if not isinstance(obj, Mapping):
        return None
    inner = obj.get("message")
    if isinstance(inner, Mapping) and "role" in inner:  # a Claude Code event
        obj = inner
    role = obj.get("role")
    if role not in _ROLES:
        return None
    return {"role": role, "content": message_text(obj)}


def read_transcript(path: str | Path) -> list[dict[str, Any]]:
    """The user/assistant/system messages of a transcript file (formats in the module doc).

    Raises:
        InvalidArgument: the file cannot be read, is neither JSON nor JSONL, or has no message.
    """
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read transcript {str(p)!r}: {exc}") from None
    items: list[Any]
    try:
        data = json.loads(raw)
        items = data.get("messages", []) if isinstance(data, Mapping) else data
        if not isinstance(items, list):
            items = [data]
    except ValueError:
        items = []
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except ValueError:
                raise InvalidArgument(
                    f"transcript {str(p)!r} line {n} is not JSON (expected JSON or JSONL)"
                ) from None
    messages = [m for m in map(_as_message, items) if m is not None]
    if not messages:
        raise InvalidArgument(f"transcript {str(p)!r} has no user or assistant message")
    return messages


def conversation_text(messages: Sequence[Any]) -> str:
    """The prompt's transcript: injected ``[Context from memory]`` blocks removed (whole
    injected messages, and an injected block that opens a message up to its first blank line);
    ``<private>`` spans removed and secrets redacted (:func:`memlane.privacy.for_llm`): neither
    is sent to the model."""
    cleaned: list[Any] = []
    for m in messages:
        text = message_text(m)
        if is_injection_text(text):
            rest = text.lstrip().split("\n\n", 1)
            if len(rest) < 2:
                continue
            text = rest[1]
        role = m.get("role") if isinstance(m, Mapping) else None
        cleaned.append({"role": role or "unknown", "content": for_llm(text)})
    return render_transcript(cleaned)


def to_inputs(
    extracted: Sequence[ExtractedMemory],
    *,
    owner: str,
    agent: str | None,
    session: str | None,
    metadata: Mapping[str, Any] | None = None,
) -> list[MemoryInput]:
    """The write path's batch: empty and injected texts dropped, unknown types become ``fact``;
    ``metadata`` (when given) on every memory."""
    out: list[MemoryInput] = []
    for e in extracted:
        text = e.content.strip()
        if not text or is_injection_text(text):
            continue
        mtype = e.type if e.type in _TYPES else MemoryType.FACT.value
        importance = min(max(float(e.importance), 0.0), 1.0)
        out.append(
            MemoryInput(
                text, mtype, owner, agent, session, importance, "learn", dict(metadata or {})
            )
        )
    return out
