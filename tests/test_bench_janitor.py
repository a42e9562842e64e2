"""``memlane bench janitor`` on a small store (hash embedder): the report's figures are sane and
consistent, the second run merges nothing, and with the scripted model (tests/llm_server.py) its
calls are counted per 1,000 memories. Never timings (machines are noisy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_server import Reply, Script, serve
from memlane.cli import app

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def child_sees_these_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """The janitor runs in a child process: it imports this checkout's memlane."""
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))


def bench(home: Path, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(
        app, ["bench", "janitor", "--home", str(home), "--json", "--memories", "400", *args]
    )
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_bench_janitor_without_a_model(tmp_path: Path) -> None:
    r = bench(tmp_path / "h")
    planted = r["planted"]
    assert isinstance(planted, dict) and sum(planted.values()) == 400 and planted["repeat"] > 0
    assert r["memories"] == 400 and 0 < r["candidate_pairs_per_memory"] <= 30  # type: ignore[operator]
    assert r["merged"] > 0 and r["absorbed"] >= r["merged"]  # type: ignore[operator]
    assert r["llm_calls"] == 0 and r["llm_calls_if_configured"] >= r["merged"]  # type: ignore[operator]
    assert r["peak_rss_mb"] > 10 and r["seconds"] > 0  # type: ignore[operator]
    phases = r["phase_seconds"]  # where the time went, within the run's own time
    assert isinstance(phases, dict) and list(phases) == ["candidates", "clusters", "merges"]
    # each figure rounded to the millisecond: the sum may pass the run's by a few
    assert 0 < sum(phases.values()) <= r["seconds"] + 0.005  # type: ignore[operator]
    second = r["second_run"]
    assert isinstance(second, dict) and second["merged"] == 0


def test_bench_janitor_counts_the_scripted_models_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    keep = json.dumps({"action": "keep", "members": [], "merged_text": None, "reasoning": "x"})
    script = Script("openai", default=Reply(keep))
    with serve(script) as url:
        for key, value in {"PROVIDER": "openai", "MODEL": "scripted", "BASE_URL": url}.items():
            monkeypatch.setenv(f"MEMLANE_LLM__{key}", value)
        r = bench(tmp_path / "h")
    calls = r["llm_calls"]
    assert isinstance(calls, int) and calls == r["llm_calls_if_configured"] > 0
    assert calls == r["skipped"]["llm_keep"]  # type: ignore[index]
    assert r["llm_calls_per_1000"] == round(calls * 1000 / 400, 2)
    assert r["merged"] == 0  # the model kept every cluster apart
    # the second run does not ask again about the clusters the model kept apart
    assert len(script.requests) == calls
    assert r["second_run"]["skipped"]["llm_keep"] == calls  # type: ignore[index]
