"""``memlane reembed``: every vector recomputed with the new model, resumable after a failure, the
recorded model switched in one transaction, the indexes rebuilt; never two models' vectors."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from typer.testing import CliRunner

from memlane import EmbeddingError, EmbeddingMismatch, HashEmbedder, MemoryEngine, Settings
from memlane.cli import app
from memlane.embeddings import embed_texts
from memlane.reembed import reembed

TEXTS = [
    "Alice prefers dark mode in every editor",
    "Bob drinks green tea every afternoon",
    "The billing service moved to PostgreSQL",
    "Carol keeps bees on the roof of her house",
    "Dave plays the cello in a quartet",
    "Erin runs a marathon every spring",
    "Frank collects stamps from Iceland",
]


class FailingEmbedder(HashEmbedder):
    """HashEmbedder(32) that fails on its ``fail_at``-th call (a model crash mid-run)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(32)
        self.calls = 0
        self.fail_at = fail_at

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("model crashed")
        return super().embed_batch(texts)


def _settings(home: Path) -> Settings:
    return Settings.load(home, embedding={"provider": "hash", "dimension": 64})


def _store_vectors(db: Path) -> dict[str, NDArray[np.float32]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT content, embedding FROM memories").fetchall()
    return {c: np.frombuffer(b, dtype=np.float32) for c, b in rows}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with MemoryEngine.open(settings=_settings(tmp_path), embedder=HashEmbedder(64)) as engine:
        engine.add_many([{"content": t, "owner": "alice"} for t in TEXTS[:4]])
        engine.add_many([{"content": t, "owner": "bob"} for t in TEXTS[4:]])
    return tmp_path


def test_reembed_switches_every_vector_and_the_model(home: Path) -> None:
    db = _settings(home).db_path
    result = reembed(db, HashEmbedder(32), batch_size=3)
    assert (result.memories, result.embedded, result.resumed) == (7, 7, 0)
    assert (result.old_model, result.new_model, result.dimension) == ("hash-64", "hash-32", 32)
    vectors = _store_vectors(db)
    want = embed_texts(HashEmbedder(32), TEXTS)
    for text, vec in zip(TEXTS, want, strict=True):
        np.testing.assert_allclose(vectors[text], vec, atol=1e-6)  # all of the new model
    with pytest.raises(EmbeddingMismatch, match="memlane reembed --model hash-64"):
        MemoryEngine.open(settings=_settings(home), embedder=HashEmbedder(64))
    with MemoryEngine.open(settings=_settings(home), embedder=HashEmbedder(32)) as engine:
        hits = engine.search("green tea afternoon", owner="alice", mode="vector", limit=1)
        assert hits[0].memory.content == TEXTS[1]  # the index was rebuilt with the new vectors
        assert engine.add("Gina speaks Portuguese", owner="bob").decision.value == "added"
    with sqlite3.connect(db) as conn:  # nothing of the staging is left
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert "reembed_staging" not in tables and "reembed.target" not in meta


def test_an_interrupted_run_resumes_and_the_store_keeps_its_model(home: Path) -> None:
    db = _settings(home).db_path
    with pytest.raises(EmbeddingError, match="model crashed"):
        reembed(db, FailingEmbedder(fail_at=3), batch_size=2)  # 2 batches staged, then a crash
    before = _store_vectors(db)
    # the store is untouched: its model, its vectors, its search
    with MemoryEngine.open(settings=_settings(home), embedder=HashEmbedder(64)) as engine:
        assert (
            engine.search("cello quartet", owner="bob", mode="vector")[0].memory.content == TEXTS[4]
        )
        engine.add("Hank bakes sourdough bread", owner="bob")  # written between the two runs
    assert all(v.shape == (64,) for v in before.values())
    seen: list[tuple[int, int]] = []
    result = reembed(db, HashEmbedder(32), batch_size=2, progress=lambda d, t: seen.append((d, t)))
    assert result.resumed == 4 and result.embedded == 4  # 3 left + the one written meanwhile
    assert seen[0] == (4, 8) and seen[-1] == (8, 8)
    vectors = _store_vectors(db)
    assert len(vectors) == 8 and all(v.shape == (32,) for v in vectors.values())


def test_a_new_target_restarts_the_staging(home: Path) -> None:
    db = _settings(home).db_path
    with pytest.raises(EmbeddingError):
        reembed(db, FailingEmbedder(fail_at=2), batch_size=3)  # hash-32 staged partly
    result = reembed(db, HashEmbedder(48), batch_size=3)
    assert result.resumed == 0 and result.embedded == 7 and result.dimension == 48


@pytest.mark.model
def test_cli_reembeds_a_store_with_the_local_model(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    monkeypatch.setenv("MEMLANE_EMBEDDING__DIMENSION", "64")
    runner = CliRunner()
    args = ["reembed", "--model", "all-MiniLM-L6-v2", "--provider", "local", "--home", str(home)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["model"] == "all-MiniLM-L6-v2" and report["memories"] == 7
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "local")
    with MemoryEngine.open(home) as engine:
        # a semantic match no word of which is shared: the real model's vectors are there
        hits = engine.search("which beverage does he like", owner="alice", mode="vector", limit=1)
        assert hits[0].memory.content == TEXTS[1]
    unknown = runner.invoke(app, ["reembed", "--model", "bge-small", "--home", str(home)])
    assert unknown.exit_code != 0 and "not a local model" in unknown.output
