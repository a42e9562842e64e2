"""Embeddings as the components use them: batched, normalised, query vectors LRU-cached."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from memlane.embeddings.base import Embedder, Vector, embed_texts
from memlane.embeddings.batcher import QueryBatcher


class Embeddings:
    """An :class:`Embedder` with batching and a per-process LRU cache of query vectors.

    Thread-safe. ``batch_size`` texts go to the model at once; ``cache_size`` query vectors are
    kept (0 = none): injection and search embed the same follow-up texts again and again.
    """

    def __init__(self, embedder: Embedder, *, batch_size: int = 64, cache_size: int = 1024):
        self.embedder = embedder
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._lock = threading.Lock()
        #: Concurrent queries share model calls (:mod:`memlane.embeddings.batcher`).
        self.batcher = QueryBatcher(
            lambda texts: embed_texts(self.embedder, texts, self.batch_size, query=True)
        )

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    def embed(self, texts: Sequence[str]) -> Vector:
        """Unit-norm float32 embeddings, shape ``(len(texts), dimension)``.

        Raises:
            EmbeddingError: the model failed (see :func:`memlane.embeddings.embed_texts`).
        """
        return embed_texts(self.embedder, texts, self.batch_size)

    def embed_query(self, text: str) -> Vector:
        """One search query's embedding, shape ``(dimension,)`` (LRU-cached; through the
        embedder's ``embed_queries`` when it has one, e.g. e5's ``"query: "`` prefix)."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vec: Vector = self.batcher.embed(text)
        if self.cache_size:
            with self._lock:
                self._cache[text] = vec
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return vec
