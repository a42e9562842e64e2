"""What a memory's fields may hold, checked before anything is written (issue #24: a metadata
object nested 256 deep was committed and then made every read of its owner fail).

The limits are generous for real provenance (a source URL, tags, a few nested objects) and small
enough that every stored memory serialises through every door (JSON, pydantic, the pages):

- :data:`METADATA_MAX_DEPTH` levels of nesting (an object holding a scalar is depth 1);
- :data:`METADATA_MAX_KEYS` keys in all, counted at every level;
- :data:`METADATA_MAX_BYTES` bytes of compact UTF-8 JSON;
- keys of at most :data:`METADATA_MAX_KEY_CHARS` characters.

Text anywhere (content, scopes, metadata keys and values) must be encodable as UTF-8 and hold
no NUL: a lone UTF-16 surrogate (JSON ``"\\ud800"``) is not a character, SQLite cannot encode
it, and PostgreSQL's ``text`` and ``jsonb`` refuse U+0000.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from memlane.errors import InvalidMemory

METADATA_MAX_DEPTH = 16
METADATA_MAX_KEYS = 512
METADATA_MAX_BYTES = 16_384
METADATA_MAX_KEY_CHARS = 256


def not_text_at(text: str) -> int:
    """The index of the first lone surrogate or NUL in ``text``, or -1 (none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return text.find("\x00")


def check_text(name: str, text: str) -> None:
    """Raise :class:`InvalidMemory` when ``text`` holds a lone surrogate or a NUL character."""
    at = not_text_at(text)
    if at >= 0:
        what = "a NUL character" if text[at] == "\x00" else "a lone UTF-16 surrogate"
        raise InvalidMemory(
            f"{name} holds {what} (U+{ord(text[at]):04X} at character {at}), which is not "
            "text a store can keep: send valid UTF-8 without NUL"
        )


#: Control characters a memory's text may hold: tab and the line breaks (every other C0 or C1
#: control character, DEL included, is invisible in a page or a prompt and is refused).
ALLOWED_CONTROLS = frozenset("\t\n\r")
_REFUSED_CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
_CONTROL = re.compile(f"[{_REFUSED_CONTROLS}]")
#: What :func:`check_controls` accepts of a non-blank text, as a regular expression for the
#: HTTP API's JSON schema (so a client knows the 422 before sending).
CONTENT_PATTERN = f"^[^{_REFUSED_CONTROLS}]*[^\\s{_REFUSED_CONTROLS}][^{_REFUSED_CONTROLS}]*$"


def check_controls(name: str, text: str) -> None:
    """Raise :class:`InvalidMemory` when ``text`` holds a control character other than tab and
    line breaks (:data:`ALLOWED_CONTROLS`): the same refusal on every door (CLI, HTTP, MCP)."""
    match = _CONTROL.search(text)
    if match:
        raise InvalidMemory(
            f"{name} holds a control character (U+{ord(match.group()):04X} at character "
            f"{match.start()}): remove it (tabs and line breaks are fine)"
        )


def check_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON copy of ``metadata`` within the limits above. Raises :class:`InvalidMemory`
    naming the limit (depth, keys, bytes, key length, a value JSON cannot hold)."""
    keys = 0

    def walk(value: Any, depth: int, where: str) -> None:
        nonlocal keys
        if isinstance(value, Mapping):
            depth += 1
            if depth > METADATA_MAX_DEPTH:
                raise InvalidMemory(
                    f"metadata is too deep: over {METADATA_MAX_DEPTH} levels of nesting at "
                    f"{where or 'the top'} (flatten it)"
                )
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidMemory(f"metadata key {key!r} at {where or 'the top'} is not text")
                keys += 1
                if keys > METADATA_MAX_KEYS:
                    raise InvalidMemory(f"metadata has too many keys: over {METADATA_MAX_KEYS}")
                if len(key) > METADATA_MAX_KEY_CHARS:
                    raise InvalidMemory(
                        f"metadata key {key[:40]!r}... is too long: over "
                        f"{METADATA_MAX_KEY_CHARS} characters"
                    )
                check_text(f"metadata key {key[:40]!r}", key)
                walk(item, depth, f"{where}.{key}" if where else key)
        elif isinstance(value, list | tuple):
            depth += 1
            if depth > METADATA_MAX_DEPTH:
                raise InvalidMemory(
                    f"metadata is too deep: over {METADATA_MAX_DEPTH} levels of nesting at "
                    f"{where} (flatten it)"
                )
            for n, item in enumerate(value):
                walk(item, depth, f"{where}[{n}]")
        elif isinstance(value, str):
            check_text(f"metadata value at {where}", value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidMemory(f"metadata value at {where} is {value}, which JSON cannot hold")
        elif value is not None and not isinstance(value, bool | int | float):
            raise InvalidMemory(
                f"metadata value at {where} is a {type(value).__name__}, not JSON "
                "(use objects, lists, text, numbers, true/false or null)"
            )

    walk(metadata, 0, "")
    text = json.dumps(dict(metadata), ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8"))
    if size > METADATA_MAX_BYTES:
        raise InvalidMemory(
            f"metadata is {size:,} bytes as JSON, over the limit of {METADATA_MAX_BYTES:,} bytes "
            "(keep large documents elsewhere and store a reference)"
        )
    result: dict[str, Any] = json.loads(text)
    return result
