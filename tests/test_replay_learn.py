"""``memlane replay --learn``: the configured LLM (a scripted OpenAI-compatible server,
tests/llm_server.py, through the real SDK) learns from each session's raw dialogue instead of the
dataset's prepared observations; the whole loop is measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_server import Reply, Script, Status, serve
from memlane import MemoryEngine
from memlane.cli import app
from memlane.eval.replay import load_locomo

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "locomo_sample.json"


def learned(*texts: str) -> Reply:
    return Reply(json.dumps({"memories": [{"content": t, "type": "fact"} for t in texts]}))


def test_replay_learn_from_the_dialogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    conv = load_locomo(SAMPLE)[0]
    sessions = len(conv.sessions)
    first_turn, last_turn = conv.sessions[0][1][0], conv.sessions[0][1][-1]
    script = Script(
        "openai",
        steps=[
            learned("Priya moved to a new flat.", "Melanie paints sunsets."),
            Status(500),  # one session's call fails: counted, the replay goes on
            *[learned(f"Fact number {n} from the talk.") for n in range(3, sessions + 1)],
        ],
    )
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    with serve(script) as url:
        for key, value in {
            "PROVIDER": "openai",
            "MODEL": "scripted",
            "BASE_URL": url,
            "MAX_RETRIES": "0",
        }.items():
            monkeypatch.setenv(f"MEMLANE_LLM__{key}", value)
        result = CliRunner().invoke(
            app, ["replay", str(SAMPLE), "--learn", "--json", "--home", str(home)]
        )
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    report = json.loads(result.stdout)
    assert report["memories_from"] == "dialogue (LLM)"
    assert report["llm"]["calls"] == sessions and report["llm"]["failures"] == 1
    assert report["learn_failures"] == 1
    assert report["retrieval"]["questions"] > 0 and "recall_at_10" in report["retrieval"]
    first_prompt = json.dumps(script.requests[0]["json"])
    assert first_turn.message() in first_prompt and last_turn.message() in first_prompt
    monkeypatch.delenv("MEMLANE_LLM__PROVIDER")
    engine = MemoryEngine.open(home)
    try:
        owner = report["conversations"][0]
        stored = {m.content: m for m in engine.list(owner=owner, limit=100)}
    finally:
        engine.close()
    assert "Melanie paints sunsets." in stored and "Fact number 2 from the talk." not in stored
    evidence = stored["Melanie paints sunsets."].metadata["evidence"]
    assert evidence and all(e.startswith("D1:") for e in evidence)  # session 1's turns
