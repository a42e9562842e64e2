"""Optional onnxruntime fast path for the local model (all-MiniLM-L6-v2).

Why: a query is one short text, and through torch one forward pass costs ~12-16 ms here, most of
it framework overhead; the same graph through onnxruntime costs ~5 ms (ARCHITECTURE.md,
"Embeddings"). The model ships as safetensors only, so the first process that needs it exports the
transformer plus the model's mean pooling and L2 normalisation to ONNX (``torch.onnx.export``,
needs the ``onnx`` package), once, into a cache folder (``$MEMLANE_MODEL_CACHE``, else
``$XDG_CACHE_HOME/memlane/models``, else ``~/.cache/memlane/models``). The file name carries a
fingerprint of the model files and of the torch version (read from the package metadata, torch is
not imported), so a new model or exporter exports anew.

What is checked when:

* After an export, and whenever a process finds an ONNX file without a matching record,
  :func:`load_encoder` checks the ONNX vectors (tokenized by :class:`FastTokenizer`, exactly as
  they will be later) against the torch path on a few probe texts, single and batched: max abs
  difference at most :data:`TOLERANCE` (measured here ~2e-7). A passed check is recorded in a
  sidecar next to the file, ``<name>.onnx.verified.json``: the difference measured, the file's
  size and mtime_ns, the onnxruntime, tokenizers and export versions.
* Every later load (:func:`load_verified`) only compares that record with the file and the
  installed onnxruntime/tokenizers; when all match it builds the encoder from onnxruntime and
  ``tokenizers`` alone. So the check runs once per export and runtime version, not once per
  process. Why: cold start. Each CLI call (``memlane search``, ``memlane inject``, a hook per
  prompt) is a fresh process, and importing torch + sentence-transformers, loading the model and
  re-checking cost ~7 s before the first vector; the verified path costs well under a second.
* Anything else (no record, a record for another file size/mtime or another onnxruntime or
  tokenizers version, onnxruntime or onnx missing, a failed export or check) means the caller
  loads torch: a mismatched record is checked again (and re-recorded when it passes), a failed
  check keeps the torch path. Nothing here is required.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings.base import MODEL_NAME

log = logging.getLogger("memlane.embeddings")

#: Largest allowed difference between an ONNX vector and the torch one (per component).
TOLERANCE = 1e-4
#: Bump to invalidate exported files (part of the fingerprint and of the sidecar).
EXPORT_VERSION = 1
OPSET = 17
#: Suffix of the record of a passed check, next to the ONNX file.
SIDECAR_SUFFIX = ".verified.json"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = (
    "Alice prefers dark mode in every editor.",
    "When is the Amber Falcon deadline?",
    "ünïcödé ☃ 日本語 and a few more words to make the sequence longer than the others",
    "A text long enough to be truncated at max_seq_length tokens. " * 30,
)


def default_cache_dir() -> Path:
    explicit = os.environ.get("MEMLANE_MODEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "memlane" / "models"


def _version(package: str) -> str:
    """Installed version of ``package`` from its metadata (nothing imported), ``none`` if absent."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def fingerprint(model_dir: Path) -> str:
    """Model files (names, sizes, small files' bytes) plus the torch version and export format."""
    h = hashlib.sha256(f"v{EXPORT_VERSION}|opset{OPSET}|torch{_version('torch')}".encode())
    for file in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        size = file.stat().st_size
        h.update(f"|{file.relative_to(model_dir)}:{size}".encode())
        if size < 1_000_000:
            h.update(file.read_bytes())
    return h.hexdigest()[:16]


def onnx_file(model_dir: Path, cache_dir: Path | None = None) -> Path:
    """Where the export of the model in ``model_dir`` lives (it may not exist yet)."""
    return (cache_dir or default_cache_dir()) / f"{MODEL_NAME}-{fingerprint(model_dir)}.onnx"


def sidecar_file(file: Path) -> Path:
    """The record of a passed check of ``file``."""
    return file.with_name(file.name + SIDECAR_SUFFIX)


def _stamp(file: Path) -> dict[str, Any]:
    """What a passed check of ``file`` holds for: the file's size and mtime_ns, the onnxruntime
    and tokenizers versions and the export format."""
    stat = file.stat()
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "onnxruntime": _version("onnxruntime"),
        "tokenizers": _version("tokenizers"),
        "export_version": EXPORT_VERSION,
    }


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` that replaces it when the block succeeds (other
    processes never see a half-written file); removed when the block fails."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _write_sidecar(file: Path, max_diff: float) -> None:
    """Record that ``file`` passed the check (atomically)."""
    record = {"file": file.name, **_stamp(file), "max_diff": max_diff, "tolerance": TOLERANCE}
    with _replacing(sidecar_file(file)) as tmp:
        tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def is_verified(file: Path) -> bool:
    """Whether ``file`` has a record of a passed check that still matches it (:func:`_stamp`:
    same size and mtime_ns, onnxruntime, tokenizers and export versions), difference within
    tolerance."""
    try:
        record = json.loads(sidecar_file(file).read_text(encoding="utf-8"))
        want = _stamp(file)
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict):
        return False
    if any(record.get(key) != value for key, value in want.items()):
        return False
    diff = record.get("max_diff")
    return isinstance(diff, int | float) and 0 <= diff <= TOLERANCE


def _onnxruntime_importable() -> bool:
    """Import onnxruntime if that is safe and possible."""
    if "onnxruntime" not in sys.modules and "usearch.compiled" in sys.modules:
        # Importing onnxruntime after usearch segfaults (see memlane.store.vector_index, which
        # imports it first); usearch came in some other way, so stay on torch.
        log.warning("onnxruntime must be imported before usearch; using torch")
        return False
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        log.debug("onnxruntime not installed: local model runs on torch only")
        return False
    return True


def max_seq_length(model_dir: Path) -> int:
    """The model's ``max_seq_length`` (``sentence_bert_config.json``; what sentence-transformers
    truncates to)."""
    config = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
    return int(config["max_seq_length"])


class FastTokenizer:
    """The model's tokenizer through ``tokenizers`` alone (no transformers, no torch).

    Gives the same ``input_ids`` / ``attention_mask`` / ``token_type_ids`` as the Hugging Face
    tokenizer called with ``truncation=True, max_length=max_length, padding=True``: truncation at
    ``max_length`` tokens (special tokens included), padding to the longest text of the batch with
    the tokenizer's pad token (``tokenizer.json`` itself says 128 and fixed padding, overridden
    here), as int64 arrays.
    """

    def __init__(self, model_dir: Path, max_length: int | None = None) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        pad_token = str((tokenizer.padding or {}).get("pad_token") or "[PAD]")
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
            pad_token = str(config.get("pad_token") or pad_token)
        pad_id = tokenizer.token_to_id(pad_token)
        if pad_id is None:
            raise ValueError(f"pad token {pad_token!r} is not in the vocabulary")
        self.max_length = max_seq_length(model_dir) if max_length is None else int(max_length)
        tokenizer.enable_truncation(max_length=self.max_length)
        tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token, pad_type_id=0)
        self._tokenizer = tokenizer

    def __call__(self, texts: Sequence[str]) -> dict[str, NDArray[np.int64]]:
        encodings = self._tokenizer.encode_batch(list(texts))
        return {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }


#: Texts per onnxruntime call within a length-sorted batch (measured here: 16 gives ~300/s,
#: 32 ~280/s, 64 ~260/s, whole batches of 256 ~220/s).
_SUB_BATCH = 16


class OnnxEncoder:
    """Tokenizer + ONNX graph (transformer, mean pooling, L2 normalisation).

    One onnxruntime session on ``threads`` threads that sleep instead of spin-waiting between
    runs: spinning threads fight for the cores with everything else on a small machine (measured
    here, 2 cores: per query 6.8 ms without spinning vs 15.5 ms with; 7.5 ms on one thread).
    Batches are run sorted by length, so little padding is computed.
    """

    def __init__(self, path: Path, tokenizer: FastTokenizer, *, threads: int) -> None:
        self._tokenizer = tokenizer
        self._session = _session(path, threads)
        self._inputs = [i.name for i in self._session.get_inputs()]
        width = self._session.get_outputs()[0].shape[-1]
        self._width = width if isinstance(width, int) else 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self._width), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        by_length = np.concatenate(
            [
                self._run([texts[i] for i in order[start : start + _SUB_BATCH]])
                for start in range(0, len(order), _SUB_BATCH)
            ]
        )
        out = np.empty_like(by_length)
        out[order] = by_length
        return out

    def _run(self, texts: Sequence[str]) -> NDArray[np.float32]:
        enc = self._tokenizer(texts)
        feed = {name: enc[name] for name in self._inputs}
        return np.asarray(self._session.run(None, feed)[0], dtype=np.float32)


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _threads(threads: int | None) -> int:
    return min(4, os.cpu_count() or 1) if threads is None else threads


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
    with _replacing(target) as tmp, warnings.catch_warnings(), torch.no_grad():
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


def load_verified(
    model_dir: Path, *, cache_dir: Path | None = None, threads: int | None = None
) -> OnnxEncoder | None:
    """The ONNX encoder built without torch, or ``None`` unless the export exists and its sidecar
    records a passed check that still matches it (:func:`is_verified`) and it loads."""
    file = onnx_file(model_dir, cache_dir)
    if not is_verified(file) or not _onnxruntime_importable():
        return None
    try:
        encoder = OnnxEncoder(file, FastTokenizer(model_dir), threads=_threads(threads))
    except Exception as exc:  # optional fast path: any failure means torch
        log.warning("verified ONNX model %s does not load (%s); checking it again", file, exc)
        return None
    log.debug("ONNX fast path ready (%s, checked before)", file)
    return encoder


def load_encoder(
    model: Any,
    model_dir: Path,
    reference: Callable[[str], NDArray[np.float32]],
    *,
    cache_dir: Path | None = None,
    threads: int | None = None,
) -> OnnxEncoder | None:
    """The ONNX encoder for ``model`` (exported on first use) after checking it, or ``None`` when
    onnxruntime is not installed, the export fails, or its vectors (single and batched) differ
    from ``reference`` (the torch path) by more than :data:`TOLERANCE` on the probe texts. A
    passed check is recorded next to the file (:func:`load_verified` then skips it); a failed one
    removes the record. ``threads``: default the CPU count, at most 4."""
    if not _onnxruntime_importable():
        return None
    file = onnx_file(model_dir, cache_dir)
    existed = file.is_file()
    encoder, failed = _export_and_check(model, model_dir, reference, file, threads)
    if failed and existed:
        # A file left by an earlier process that onnxruntime cannot run (truncated, corrupt):
        # export once more rather than paying the torch load in every process from now on.
        log.info("re-exporting the unusable ONNX file %s", file)
        with contextlib.suppress(OSError):
            file.unlink()
        encoder, _ = _export_and_check(model, model_dir, reference, file, threads)
    return encoder


def _export_and_check(
    model: Any,
    model_dir: Path,
    reference: Callable[[str], NDArray[np.float32]],
    file: Path,
    threads: int | None,
) -> tuple[OnnxEncoder | None, bool]:
    """Export ``file`` if missing, then check it (see :func:`load_encoder`): the encoder or
    ``None``, and whether the file failed to export or run (as opposed to a measured mismatch,
    which a new export would repeat)."""
    try:
        if not file.is_file():
            log.info("exporting the embedding model to ONNX (once): %s", file)
            _export(model, file)
        # The tokenizer as load_verified builds it (max_length from the model's config); a
        # max_length other than the torch model's shows in the long probe's vector.
        encoder = OnnxEncoder(file, FastTokenizer(model_dir), threads=_threads(threads))
        want = np.stack([np.asarray(reference(t), dtype=np.float32).reshape(-1) for t in _PROBES])
        got = np.concatenate([encoder.embed(list(_PROBES)), *(encoder.embed([t]) for t in _PROBES)])
        diff = float(np.max(np.abs(got - np.concatenate([want, want]))))
    except Exception as exc:  # optional fast path: any failure means torch
        log.warning("ONNX fast path unavailable (%s); using torch", exc)
        _forget(file)
        return None, True
    if not diff <= TOLERANCE:
        log.warning(
            "ONNX model %s differs from torch by %.2e (> %.0e); using torch", file, diff, TOLERANCE
        )
        _forget(file)
        return None, False
    try:
        _write_sidecar(file, diff)
    except OSError as exc:  # the encoder is fine; the next process just checks again
        log.warning("could not record the ONNX check next to %s (%s)", file, exc)
    log.debug("ONNX fast path ready (%s, max diff %.1e, recorded)", file, diff)
    return encoder, False


def _forget(file: Path) -> None:
    """Remove the record of a passed check of ``file`` (it failed now)."""
    with contextlib.suppress(OSError):
        sidecar_file(file).unlink()
