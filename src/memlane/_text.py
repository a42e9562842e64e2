"""Text normalisation shared by the content hash, the near-identical guard and the FTS query."""

from __future__ import annotations

import hashlib
import re
import unicodedata

#: Version tag of the content-hash format (bump if normalisation changes; old rows keep theirs).
HASH_VERSION = "v1"

_WS = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)


def normalise(text: str) -> str:
    """NFKC-normalise, lower-case (casefold) and collapse whitespace."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def content_hash(text: str) -> str:
    """``v1:`` + sha256 hex of :func:`normalise` (text), the exact-duplicate key of the write path."""
    digest = hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()
    return f"{HASH_VERSION}:{digest}"


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters/digits, inner apostrophes kept) of normalised text."""
    return _WORD.findall(normalise(text))
