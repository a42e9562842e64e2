"""A small deterministic embedder for fast tests (no model, no randomness).

Feature hashing (Weinberger et al. 2009): each lower-cased word and each character trigram of a
word is hashed with BLAKE2b into one of ``dimension`` buckets with a +/-1 sign. Texts that share
words share buckets, so near-identical texts have a cosine near 1 and unrelated ones near 0 — enough
to exercise the write path and retrieval, not a semantic model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from memlane._text import words


class HashEmbedder:
    """Deterministic feature-hashing embedder; ``name`` is ``hash-<dimension>``."""

    def __init__(self, dimension: int = 384) -> None:
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"hash-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _features(self, text: str) -> list[tuple[str, float]]:
        feats: list[tuple[str, float]] = []
        for w in words(text):
            feats.append(("w:" + w, 1.0))
            padded = f"<{w}>"
            feats.extend(("t:" + padded[i : i + 3], 0.3) for i in range(len(padded) - 2))
        return feats

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, weight in self._features(text):
                h = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(h, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self._dimension] += sign * weight
        return out
