"""``memlane bench embed``: every installed model timed in its own process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli import app
from memlane.eval.bench.embed import installed_models


@pytest.mark.model
def test_bench_embed_times_the_default_model() -> None:
    assert "all-MiniLM-L6-v2" in installed_models()  # the 'local' extra is installed
    args = ["bench", "embed", "--model", "all-MiniLM-L6-v2", "--queries", "5", "--batch", "20"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["models"]
    assert row["model"] == row["name"] == "all-MiniLM-L6-v2"
    assert row["cold_start_s"] > 0 and row["batch_per_s"] > 0 and row["peak_memory_mb"] > 10
    assert 0 < row["query_p50_ms"] <= row["query_p95_ms"]
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and "bench embed" in table.stdout  # the table (narrow here)


def test_an_unknown_model_fails_with_its_name() -> None:
    result = CliRunner().invoke(app, ["bench", "embed", "--model", "bge-small", "--queries", "1"])
    assert result.exit_code != 0 and "bge-small" in result.output


@pytest.mark.model
def test_bench_embed_times_the_q8_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnx")  # the 'local-q8' extra
    monkeypatch.setenv("MEMLANE_MODEL_CACHE", str(tmp_path))  # the child derives the file here
    assert "all-MiniLM-L6-v2-q8" in installed_models()
    args = ["bench", "embed", "--model", "all-MiniLM-L6-v2-q8", "--queries", "5", "--batch", "20"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["models"]
    assert row["model"] == row["name"] == "all-MiniLM-L6-v2-q8"  # the store name it records
    assert 0 < row["query_p50_ms"] <= row["query_p95_ms"] and row["batch_per_s"] > 0
    assert any(p.suffix == ".onnx" for p in tmp_path.iterdir())
