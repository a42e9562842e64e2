"""Optional onnxruntime fast path for the local model (all-MiniLM-L6-v2).

Why: a query is one short text, and through torch one forward pass costs ~12-16 ms here, most of
it framework overhead; the same graph through onnxruntime costs ~5 ms (ARCHITECTURE.md,
"Embeddings"). The model ships as safetensors only, so the first process that needs it exports the
transformer plus the model's mean pooling and L2 normalisation to ONNX (``torch.onnx.export``,
needs the ``onnx`` package), once, into a cache folder (``$MEMLANE_MODEL_CACHE``, else
``$XDG_CACHE_HOME/memlane/models``, else ``~/.cache/memlane/models``). The file name carries a
fingerprint of the model files and of the torch version, so a new model or exporter exports anew.

Every load checks the ONNX vectors against the torch path on a few probe texts (max abs difference
at most :data:`TOLERANCE`; measured here ~2e-7); if onnxruntime or onnx is missing, the export
fails or the check fails, the caller keeps the torch path. Nothing here is required.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

log = logging.getLogger("memlane.embeddings")

#: Largest allowed difference between an ONNX vector and the torch one (per component).
TOLERANCE = 1e-4
#: Bump to invalidate exported files (part of the fingerprint).
EXPORT_VERSION = 1
OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = (
    "Alice prefers dark mode in every editor.",
    "When is the Amber Falcon deadline?",
    "ünïcödé ☃ 日本語 and a few more words to make the sequence longer than the others",
)


def default_cache_dir() -> Path:
    explicit = os.environ.get("MEMLANE_MODEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "memlane" / "models"


def fingerprint(model_dir: Path) -> str:
    """Model files (names, sizes, small files' bytes) plus the torch version and export format."""
    import torch

    h = hashlib.sha256(f"v{EXPORT_VERSION}|opset{OPSET}|torch{torch.__version__}".encode())
    for file in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        size = file.stat().st_size
        h.update(f"|{file.relative_to(model_dir)}:{size}".encode())
        if size < 1_000_000:
            h.update(file.read_bytes())
    return h.hexdigest()[:16]


class OnnxEncoder:
    """Tokenizer + ONNX graph (transformer, mean pooling, L2 normalisation).

    One onnxruntime session on ``threads`` threads that sleep instead of spin-waiting between
    runs: spinning threads fight for the cores with everything else on a small machine (measured
    here, 2 cores: per query 6.8 ms without spinning vs 15.5 ms with; 7.5 ms on one thread).
    Batches are run sorted by length, so little padding is computed.
    """

    def __init__(self, path: Path, tokenizer: Any, max_length: int, *, threads: int) -> None:
        self._tokenizer = tokenizer
        self._max_length = max_length
        self._session = _session(path, threads)
        self._inputs = [i.name for i in self._session.get_inputs()]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if len(texts) <= 1:
            return self._run(self._session, texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), 0), dtype=np.float32)
        for start in range(0, len(order), _SUB_BATCH):
            idx = order[start : start + _SUB_BATCH]
            part = self._run(self._session, [texts[i] for i in idx])
            if out.shape[1] == 0:
                out = np.empty((len(texts), part.shape[1]), dtype=np.float32)
            out[idx] = part
        return out

    def _run(self, session: Any, texts: Sequence[str]) -> NDArray[np.float32]:
        enc = self._tokenizer(
            list(texts),
            return_tensors="np",
            truncation=True,
            max_length=self._max_length,
            padding=True,
        )
        feed = {name: np.asarray(enc[name], dtype=np.int64) for name in self._inputs}
        return np.asarray(session.run(None, feed)[0], dtype=np.float32)


#: Texts per onnxruntime call within a length-sorted batch (measured here: 16 gives ~300/s,
#: 32 ~280/s, 64 ~260/s, whole batches of 256 ~220/s).
_SUB_BATCH = 16


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _export(model: Any, target: Path) -> None:
    """Export ``model`` (a SentenceTransformer of the BERT family) to ``target``, atomically."""
    import torch

    transformer = model[0].auto_model

    class _Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    enc = model.tokenizer(["an example sentence", "another"], return_tensors="pt", padding=True)
    args = tuple(enc[name] for name in _INPUTS)
    axes = {name: {0: "batch", 1: "sequence"} for name in _INPUTS}
    axes["embedding"] = {0: "batch"}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Graph().eval(),
                args,
                str(tmp),
                input_names=list(_INPUTS),
                output_names=["embedding"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def load_encoder(
    model: Any,
    model_dir: Path,
    reference: Callable[[str], NDArray[np.float32]],
    *,
    cache_dir: Path | None = None,
    threads: int | None = None,
) -> OnnxEncoder | None:
    """The ONNX encoder for ``model`` (exported on first use), or ``None`` when onnxruntime is not
    installed, the export fails, or its vectors (single and batched) differ from ``reference``
    (the torch path) by more than :data:`TOLERANCE` on the probe texts. ``threads``: default the
    CPU count, at most 4."""
    if "onnxruntime" not in sys.modules and "usearch.compiled" in sys.modules:
        # Importing onnxruntime after usearch segfaults (see memlane.store.vector_index, which
        # imports it first); usearch came in some other way, so stay on torch.
        log.warning("onnxruntime must be imported before usearch; using torch")
        return None
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        log.debug("onnxruntime not installed: local model runs on torch only")
        return None
    if threads is None:
        threads = min(4, os.cpu_count() or 1)
    file = (cache_dir or default_cache_dir()) / f"all-MiniLM-L6-v2-{fingerprint(model_dir)}.onnx"
    try:
        if not file.is_file():
            log.info("exporting the embedding model to ONNX (once): %s", file)
            _export(model, file)
        encoder = OnnxEncoder(
            file,
            model.tokenizer,
            int(model.max_seq_length),
            threads=threads,
        )
        want = np.stack([np.asarray(reference(t), dtype=np.float32).reshape(-1) for t in _PROBES])
        got = np.concatenate([encoder.embed(list(_PROBES)), *(encoder.embed([t]) for t in _PROBES)])
        diff = float(np.max(np.abs(got - np.concatenate([want, want]))))
    except Exception as exc:  # optional fast path: any failure means torch
        log.warning("ONNX fast path unavailable (%s); using torch", exc)
        return None
    if not diff <= TOLERANCE:
        log.warning(
            "ONNX model %s differs from torch by %.2e (> %.0e); using torch", file, diff, TOLERANCE
        )
        return None
    log.debug("ONNX fast path ready (%s, max diff %.1e)", file, diff)
    return encoder
