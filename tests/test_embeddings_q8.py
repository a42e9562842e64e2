"""The opt-in ``all-MiniLM-L6-v2-q8`` model: derived at first load from the default model's file
into a cache folder (offline), close to the default's vectors, rebuilt when its file is damaged,
safe when two processes derive it at once, and a model of its own for the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import Backend
from memlane import EmbeddingError, EmbeddingMismatch, LocalEmbedder, Settings
from memlane.embeddings import embed_texts, make_embedder
from memlane.embeddings.local import MODEL_SHA256
from memlane.embeddings.profiles import MINILM_Q8
from memlane.embeddings.quantized import MODEL_NAME, QuantizedEmbedder, cache_key, derived_model
from memlane.store import reembed_store

pytest.importorskip("onnx")  # the 'local-q8' extra (make install installs it)

SRC = str(Path(__file__).resolve().parents[1] / "src")
FIXTURE = Path(__file__).parent / "data" / "minilm_fp32_reference.json"
TEXTS = [
    "Alice prefers dark mode in every editor",
    "Bob drinks green tea every afternoon",
    "Ok so which team is Ruth Suzuki on? I need it for the planning meeting tomorrow",
    "The deploy script lives in scripts/deploy.sh and needs the staging token",
    "hello",
    "A much longer text about the migration of the billing service " * 20,
]


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# A fresh interpreter that cannot open a socket: the model is derived and run offline.
_OFFLINE_EMBED = """
import json, socket, sys, time
def _no_network(*args, **kwargs):
    raise OSError("network access attempted")
socket.socket = _no_network
socket.create_connection = _no_network
from pathlib import Path
while not Path(sys.argv[1]).exists():  # the parent's start signal
    time.sleep(0.01)
from memlane.embeddings import embed_texts, make_embedder
embedder = make_embedder("local", model="all-MiniLM-L6-v2-q8")
vector = embed_texts(embedder, ["Bob drinks green tea every afternoon"])[0]
print(json.dumps({"name": embedder.name, "vector": vector.tolist()}))
"""


def _start(cache: Path, go: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "MEMLANE_MODEL_CACHE": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-c", _OFFLINE_EMBED, str(go)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    """A fresh process that cannot open a socket derives the model into an empty cache folder
    and embeds one text: (the folder, its JSON answer, its stderr). The folder is this file's
    cache from then on."""
    folder = tmp_path_factory.mktemp("q8")
    cache, go = folder / "cache", folder / "go"
    go.touch()
    proc = _start(cache, go)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return cache, json.loads(out), err


@pytest.fixture(scope="module")
def q8_folder(offline_run: tuple[Path, dict[str, Any], str]) -> Path:
    return offline_run[0]


@pytest.fixture(scope="module")
def q8(q8_folder: Path) -> QuantizedEmbedder:
    embedder = QuantizedEmbedder(folder=q8_folder)
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.mark.model
def test_q8_is_derived_offline_into_the_cache_and_gives_unit_vectors(
    offline_run: tuple[Path, dict[str, Any], str],
) -> None:
    cache, row, err = offline_run
    vector = np.array(row["vector"], dtype=np.float32)
    assert row["name"] == MODEL_NAME and vector.shape == (384,)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    key = cache_key()
    assert _files(cache) == [f"{key}.json", f"{key}.onnx"]  # no temporary file left behind
    manifest = json.loads((cache / f"{key}.json").read_text())
    assert manifest["bytes"] == (cache / f"{key}.onnx").stat().st_size
    assert manifest["source_sha256"] == MODEL_SHA256
    assert "network access attempted" not in err
    assert "pre-processing" not in err  # the quantiser's advice is not printed to the user


@pytest.mark.model
def test_q8_vectors_stay_close_to_the_default_models(
    q8: QuantizedEmbedder, local_embedder: LocalEmbedder
) -> None:
    assert q8.name == "all-MiniLM-L6-v2-q8" and q8.dimension == 384
    got = embed_texts(q8, TEXTS)
    want = embed_texts(local_embedder, TEXTS)
    assert got.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * want).sum(axis=1)
    # measured 0.983-0.994 on these texts; over 788 LoCoMo turns min 0.969, median 0.991
    # (scripts/compare_models.py, docs/embeddings.md)
    assert cosines.min() >= 0.97, cosines
    assert cosines.max() < 0.999, cosines  # its own file runs, not the default's (max 0.994)
    assert list(np.argmax(got @ want.T, axis=1)) == list(range(len(TEXTS)))
    # and with the fp32 reference (sentence-transformers) of the parity fixture
    rows = json.loads(FIXTURE.read_text(encoding="utf-8"))["rows"]
    ref = np.array([r["vector"] for r in rows], dtype=np.float32)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    mine = embed_texts(q8, [r["text"] for r in rows])
    assert (mine * ref).sum(axis=1).min() >= 0.97  # measured 0.988-0.994
    assert list(np.argmax(mine @ ref.T, axis=1)) == list(range(len(rows)))


@pytest.mark.model
def test_a_text_gets_the_same_q8_vector_alone_and_in_a_batch(q8: QuantizedEmbedder) -> None:
    # int8 activations are scaled over the whole input: run alone, a text's vector cannot
    # depend on its neighbours in a batch
    batch = q8.embed_batch(TEXTS)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(q8.embed_batch([text])[0], batch[i], atol=1e-6)


@pytest.mark.model
def test_a_truncated_or_changed_cache_file_is_rebuilt(
    q8_folder: Path, q8: QuantizedEmbedder, tmp_path: Path
) -> None:
    key = cache_key()
    folder = tmp_path / "cache"
    folder.mkdir()
    for name in (f"{key}.onnx", f"{key}.json"):
        (folder / name).write_bytes((q8_folder / name).read_bytes())
    model = folder / f"{key}.onnx"
    whole = model.read_bytes()
    want = q8.embed_batch(TEXTS[:2])

    model.write_bytes(whole[: len(whole) // 2])  # an interrupted copy
    assert derived_model(folder) == model and model.read_bytes() == whole
    np.testing.assert_allclose(QuantizedEmbedder(folder=folder).embed_batch(TEXTS[:2]), want)

    with model.open("r+b") as fh:  # one byte changed, same size
        fh.seek(1_000_000)
        byte = fh.read(1)
        fh.seek(1_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    before = model.stat().st_mtime_ns
    assert derived_model(folder) == model and model.read_bytes() == whole
    assert model.stat().st_mtime_ns != before  # rebuilt, not trusted
    assert _files(folder) == [f"{key}.json", f"{key}.onnx"]


@pytest.mark.model
def test_two_processes_deriving_at_once_both_succeed(tmp_path: Path, q8: QuantizedEmbedder) -> None:
    cache, go = tmp_path / "cache", tmp_path / "go"
    procs = [_start(cache, go) for _ in range(2)]
    time.sleep(1.0)  # both interpreters are up and waiting (not a timing assertion)
    go.touch()  # both start deriving into the empty folder at once
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    vectors = [np.array(json.loads(out)["vector"], dtype=np.float32) for out, _ in results]
    want = q8.embed_batch(["Bob drinks green tea every afternoon"])[0]
    for vector in vectors:
        np.testing.assert_allclose(vector, want, atol=1e-6)
    key = cache_key()
    assert _files(cache) == [f"{key}.json", f"{key}.onnx"]
    assert derived_model(cache).stat().st_mtime_ns == (cache / f"{key}.onnx").stat().st_mtime_ns


def test_a_cache_folder_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")
    with pytest.raises(EmbeddingError, match=r"not-a-folder.*MEMLANE_MODEL_CACHE"):
        QuantizedEmbedder(folder=blocked).embed_batch(["hello"])
    assert blocked.read_text() == "a file where the cache folder should be"  # left as it was


def test_settings_select_q8_with_its_own_profile(tmp_path: Path) -> None:
    settings = Settings.load(tmp_path, embedding={"model": "all-MiniLM-L6-v2-q8"})
    assert settings.embedding.profile() == MINILM_Q8 and MINILM_Q8.calibrated
    assert settings.dedup.replace == MINILM_Q8.replace
    embedder = make_embedder("local", model="all-MiniLM-L6-v2-q8")  # builds nothing yet
    assert isinstance(embedder, QuantizedEmbedder) and embedder.name == MODEL_NAME


@pytest.mark.model
def test_a_store_built_with_one_model_refuses_the_other_until_reembedded(
    store_backend: Backend, q8: QuantizedEmbedder, local_embedder: LocalEmbedder
) -> None:
    pairs = [(local_embedder, q8, "one"), (q8, local_embedder, "other")]
    for built_with, opened_with, folder in pairs:
        (store_backend.home.parent / folder).mkdir()
        backend = store_backend.sibling(store_backend.home.parent / folder)
        writer = backend.engine(embedder=built_with)
        for text in ("Alice prefers dark mode in every editor", TEXTS[1], TEXTS[3]):
            writer.add(text, owner="bob")
        backend.close_all()
        backend.opened.clear()
        # the message names the command that switches the store to the model it is opened with
        with pytest.raises(EmbeddingMismatch, match=f"memlane reembed --model {opened_with.name}`"):
            backend.open_store(opened_with)
        # the command it names switches the store; then the other model opens it and finds
        result = reembed_store(backend.settings(), opened_with)
        assert (result.old_model, result.new_model) == (built_with.name, opened_with.name)
        engine = backend.engine(embedder=opened_with)
        hits = engine.search("what does Bob drink?", owner="bob", mode="vector", limit=1)
        assert hits[0].memory.content == TEXTS[1]  # "Bob drinks green tea every afternoon"
        backend.close_all()
