"""Sortable ids (UUIDv7, RFC 9562) and UTC timestamps."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime

_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_id() -> str:
    """A UUIDv7 string: 48-bit Unix milliseconds, then a 12-bit counter and random bits.

    Written here because the stdlib gains ``uuid.uuid7`` only in Python 3.14. Ids made by one
    process sort in creation order (the counter breaks ties within a millisecond).
    """
    global _last_ms, _seq
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            _seq = (_seq + 1) & 0xFFF
            if _seq == 0:
                _last_ms += 1
            ms = _last_ms
        else:
            _seq = int.from_bytes(os.urandom(2), "big") & 0x3FF
            _last_ms = ms
        seq = _seq
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | rand
    return str(uuid.UUID(int=value))


def is_id(text: object) -> bool:
    """Whether ``text`` is an id as :func:`new_id` writes it: a UUID in its canonical form
    (36 characters, lower-case hex in groups of 8-4-4-4-12). What an import accepts as a
    memory's id (``../../etc/passwd``, a NUL, 100,000 characters are not ids)."""
    if not isinstance(text, str) or len(text) != 36:
        return False
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_iso(dt: datetime) -> str:
    """Fixed-width ISO 8601 in UTC (sorts as text)."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def from_iso(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)
