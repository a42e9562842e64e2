"""Reading a learn answer item by item, so that one bad field of one item costs that field only.

Small local models (SmolLM2-135M through llama-cpp-python's server) answer the learn prompt with
JSON that is mostly right: an ``importance`` of 1.5, an item with an empty ``content``, a number
written as a string. Validating the whole answer as one pydantic model discarded every memory of
it for one such field (``memlane learn`` exited 11 and stored nothing). :func:`salvage_learn`
validates each item on its own:

- a number out of range is clamped to 0..1 and logged (``memlane.llm``, WARNING); a missing or
  unreadable ``importance`` is 0.5 (the prompt's default);
- an item without usable content (not a string, blank) is dropped and logged; the others are kept;
- a ``type`` that is not a string becomes ``fact`` (an unknown name too, later: :mod:`memlane.learn`).

It raises :class:`Unusable` (a :class:`ValueError`) only when nothing usable came back: no JSON
object, no ``memories`` list, or a non-empty list none of whose items has content. An empty list
is an explicit "nothing to learn".
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from memlane.llm import ExtractedMemory
from memlane.llm.formats import json_text

log = logging.getLogger("memlane.llm")

#: Keys a small model uses for an item's text instead of ``content`` (read in this order).
CONTENT_KEYS = ("content", "text", "memory")


class Unusable(ValueError):
    """The answer holds nothing usable (the message says why, for the model's retry)."""


def salvage_learn(text: str) -> list[ExtractedMemory]:
    """The usable memories of a learn answer ``text`` (see the module docstring).

    Raises:
        Unusable: no JSON object with a ``memories`` list, or none of its items has content.
    """
    try:
        value = json.loads(json_text(text), strict=False)
    except ValueError:
        raise Unusable("the answer is not a JSON object") from None
    items = value.get("memories") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise Unusable('the answer has no "memories" list')
    out: list[ExtractedMemory] = []
    problems: list[str] = []
    for n, item in enumerate(items, 1):
        memory = _item(n, item, problems)
        if memory is not None:
            out.append(memory)
    for problem in problems:
        log.warning("learn answer: %s", problem)
    if items and not out:
        raise Unusable(f"none of its {len(items)} memories is usable ({'; '.join(problems[:3])})")
    return out


def _item(n: int, item: Any, problems: list[str]) -> ExtractedMemory | None:
    """Item ``n`` (1-based) as a memory, or ``None`` (why: appended to ``problems``)."""
    if isinstance(item, str):
        item = {"content": item}
    if not isinstance(item, dict):
        problems.append(f"memory {n} dropped: not an object ({type(item).__name__})")
        return None
    content = next((item[k] for k in CONTENT_KEYS if isinstance(item.get(k), str)), None)
    if content is None or not content.strip():
        problems.append(f'memory {n} dropped: no text in "content"')
        return None
    kind = item.get("type")
    importance = _importance(n, item.get("importance", 0.5), problems)
    return ExtractedMemory(content.strip(), kind if isinstance(kind, str) else "fact", importance)


def _importance(n: int, raw: Any, problems: list[str]) -> float:
    """``raw`` as 0..1: clamped when out of range, 0.5 when not a number (noted in ``problems``)."""
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip().rstrip("%")) / (100.0 if raw.strip().endswith("%") else 1.0)
        except ValueError:
            value = None
    if value is None or math.isnan(value):
        problems.append(f"memory {n}: importance {raw!r} is not a number, 0.5 used")
        return 0.5
    if not 0.0 <= value <= 1.0:
        clamped = min(max(value, 0.0), 1.0)
        problems.append(f"memory {n}: importance {raw!r} out of 0..1, clamped to {clamped:g}")
        return clamped
    return value
