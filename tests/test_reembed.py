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

from conftest import Backend
from memlane import EmbeddingError, EmbeddingMismatch, HashEmbedder, MemoryEngine, Settings
from memlane.cli import app
from memlane.embeddings import embed_texts
from memlane.store import reembed_store

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


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with MemoryEngine.open(settings=_settings(tmp_path), embedder=HashEmbedder(64)) as engine:
        engine.add_many([{"content": t, "owner": "alice"} for t in TEXTS[:4]])
        engine.add_many([{"content": t, "owner": "bob"} for t in TEXTS[4:]])
    return tmp_path


@pytest.fixture
def backend(store_backend: Backend) -> Backend:
    """A store of either backend holding TEXTS (hash-64), closed."""
    engine = store_backend.engine(embedder=HashEmbedder(64))
    engine.add_many([{"content": t, "owner": "alice"} for t in TEXTS[:4]])
    engine.add_many([{"content": t, "owner": "bob"} for t in TEXTS[4:]])
    store_backend.close_all()
    store_backend.opened.clear()
    return store_backend


def _vectors(backend: Backend, dim: int) -> dict[str, NDArray[np.float32]]:
    """Every memory's stored vector by text, read through the store opened with hash-``dim``."""
    store = backend.open_store(HashEmbedder(dim))
    out: dict[str, NDArray[np.float32]] = {}
    for owner in ("alice", "bob"):
        rows = store.list_memories(owner, limit=100)
        vectors = store.embeddings(owner, [m.id for m in rows])
        out.update({m.content: np.asarray(vectors[m.id]) for m in rows})
    store.close()
    return out


def _leftovers(backend: Backend) -> tuple[set[str], dict[str, str]]:
    """The store's table names and meta rows (what a run may leave behind)."""
    if backend.name == "sqlite":
        with sqlite3.connect(backend.home / "memlane.db") as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            return tables, dict(conn.execute("SELECT key, value FROM meta").fetchall())
    import psycopg

    with psycopg.connect(backend.dsn) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        }
        return tables, dict(conn.execute("SELECT key, value FROM meta").fetchall())


def test_reembed_switches_every_vector_and_the_model(backend: Backend) -> None:
    result = reembed_store(backend.settings(), HashEmbedder(32), batch_size=3)
    assert (result.memories, result.embedded, result.resumed) == (7, 7, 0)
    assert (result.old_model, result.new_model, result.dimension) == ("hash-64", "hash-32", 32)
    vectors = _vectors(backend, 32)
    want = embed_texts(HashEmbedder(32), TEXTS)
    for text, vec in zip(TEXTS, want, strict=True):
        np.testing.assert_allclose(vectors[text], vec, atol=1e-6)  # all of the new model
    with pytest.raises(EmbeddingMismatch, match="memlane reembed --model hash-64"):
        backend.open_store(HashEmbedder(64))
    engine = backend.engine(embedder=HashEmbedder(32))
    hits = engine.search("green tea afternoon", owner="alice", mode="vector", limit=1)
    assert hits[0].memory.content == TEXTS[1]  # the index was rebuilt with the new vectors
    assert engine.add("Gina speaks Portuguese", owner="bob").decision.value == "added"
    backend.close_all()
    tables, meta = _leftovers(backend)  # nothing of the staging is left
    assert "reembed_staging" not in tables and "reembed.target" not in meta
    if backend.name == "postgres":  # the HNSW index is back, on the new column type
        import psycopg

        with psycopg.connect(backend.dsn) as conn:
            names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes")}
            typ = conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
            ).fetchone()
        assert "memories_embedding_hnsw" in names and typ == ("vector(32)",)


def test_an_interrupted_run_resumes_and_the_store_keeps_its_model(backend: Backend) -> None:
    settings = backend.settings()
    with pytest.raises(EmbeddingError, match="model crashed"):
        reembed_store(settings, FailingEmbedder(fail_at=3), batch_size=2)  # 2 batches, a crash
    # the store is untouched: its model, its vectors, its search
    before = _vectors(backend, 64)
    engine = backend.engine(embedder=HashEmbedder(64))
    assert engine.search("cello quartet", owner="bob", mode="vector")[0].memory.content == TEXTS[4]
    engine.add("Hank bakes sourdough bread", owner="bob")  # written between the two runs
    backend.close_all()
    assert all(v.shape == (64,) for v in before.values())
    seen: list[tuple[int, int]] = []
    result = reembed_store(
        settings, HashEmbedder(32), batch_size=2, progress=lambda d, t: seen.append((d, t))
    )
    assert result.resumed == 4 and result.embedded == 4  # 3 left + the one written meanwhile
    assert seen[0] == (4, 8) and seen[-1] == (8, 8)
    vectors = _vectors(backend, 32)
    assert len(vectors) == 8 and all(v.shape == (32,) for v in vectors.values())


def test_a_new_target_restarts_the_staging(backend: Backend) -> None:
    with pytest.raises(EmbeddingError):
        reembed_store(backend.settings(), FailingEmbedder(fail_at=2), batch_size=3)
    result = reembed_store(backend.settings(), HashEmbedder(48), batch_size=3)
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
