"""``memlane dedup pairs --llm``: precision and recall with the configured model (here a
scripted OpenAI-compatible server, tests/llm_server.py, through the real SDK)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_server import Reply, Script, serve
from memlane.cli import app

PAIRS = Path(__file__).resolve().parents[1] / "examples" / "pairs.tsv"


def run(tmp_path: Path, *args: str) -> tuple[int, dict[str, object], str]:
    result = CliRunner().invoke(
        app,
        ["dedup", "pairs", str(PAIRS), "--out", str(tmp_path / "d.jsonl"), "--json", *args],
    )
    data = json.loads(result.stdout) if result.exit_code == 0 else {}
    return result.exit_code, data, result.stderr


def test_pairs_with_and_without_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path / "home"))
    code, plain, _ = run(tmp_path)
    assert code == 0 and "llm" not in plain
    code, _, stderr = run(tmp_path, "--llm")
    assert code == 5 and "llm.provider" in stderr  # ConfigError: names the setting

    reject = json.dumps({"action": "reject", "merged_text": None, "reasoning": "same"})
    script = Script("openai", default=Reply(reject))  # the model calls every gray pair a dup
    with serve(script) as url:
        for key, value in {"PROVIDER": "openai", "MODEL": "scripted", "BASE_URL": url}.items():
            monkeypatch.setenv(f"MEMLANE_LLM__{key}", value)
        code, plain_again, _ = run(tmp_path)  # configured, but no --llm: never asked
        assert code == 0 and script.requests == []
        code, with_llm, stderr = run(tmp_path, "--llm")
    assert code == 0
    llm = with_llm["llm"]
    assert isinstance(llm, dict) and llm["calls"] == len(script.requests) > 0
    assert "LLM openai scripted" in stderr and "precision" in stderr
    decisions = with_llm["decisions"]
    assert isinstance(decisions, dict) and decisions.get("llm_reject") == llm["calls"]
    assert "gray_keep" not in decisions  # every gray pair went to the model
    before, after = plain_again["metrics"], with_llm["metrics"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert after["tp"] + after["fp"] > before["tp"] + before["fp"]  # more pairs called duplicate
