"""Embedders: the deterministic hash embedder, the protocol's checks, the local default model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from memlane import ConfigError, Embedder, EmbeddingError, HashEmbedder, LocalEmbedder
from memlane.embeddings import embed_texts, make_embedder

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
