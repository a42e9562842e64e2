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


def test_the_table_keeps_whole_model_names_in_a_narrow_terminal() -> None:
    """In an 80-column terminal both rows read ``all-MiniLM-…`` before: which row was the q8
    model could not be told."""
    from rich.console import Console

    from memlane.cli.bench_embed import embed_table

    row = {"cold_start_s": 0.5, "query_p50_ms": 6.7, "query_p95_ms": 8.0, "batch_per_s": 237}
    result = {
        "cpus": 2,
        "models": [
            {"model": "all-MiniLM-L6-v2", **row, "peak_memory_mb": 281},
            {"model": "all-MiniLM-L6-v2-q8", **row, "peak_memory_mb": 116},
        ],
    }
    console = Console(width=80, record=True, color_system=None)
    console.print(embed_table(result))
    text = console.export_text()
    assert "all-MiniLM-L6-v2-q8" in text and "…" not in text
    lines = [line for line in text.splitlines() if "all-MiniLM-L6-v2" in line]
    assert len(lines) == 2 and "281" in lines[0] and "116" in lines[1]
