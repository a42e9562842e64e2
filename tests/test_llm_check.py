"""``memlane llm check`` against real HTTP servers on 127.0.0.1 (tests/llm_server.py): the form a
llama-cpp-python-like server accepts, each kind of call's answer and tokens, and true errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_server import LLAMA_CPP, TOKENS_IN, TOKENS_OUT, Die, Refuse, Reply, Script, serve
from memlane.cli import app

pytest.importorskip("openai")

VERIFY = json.dumps({"action": "reject", "merged_text": None, "reasoning": "same preference"})
MERGE = json.dumps(
    {"action": "merge", "members": [1, 2], "merged_text": "Bob lives in Paris", "reasoning": "x"}
)
LEARN = json.dumps({"memories": [{"content": "The user lives in Berlin", "type": "fact"}]})


def run_check(tmp_path: Path, url: str, *args: str) -> tuple[int, str]:
    (tmp_path / "memlane.toml").write_text(
        f'[llm]\nprovider = "openai"\nmodel = "smollm2"\nbase_url = "{url}"\nmax_retries = 0\n'
        "timeout_s = 5\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["llm", "check", "--home", str(tmp_path), *args])
    return result.exit_code, result.output


def test_check_reports_the_form_the_server_took_and_every_kind_of_call(tmp_path: Path) -> None:
    script = Script("openai", steps=[Reply(VERIFY), Reply(MERGE), Reply(LEARN)], refuse=LLAMA_CPP)
    with serve(script) as url:
        code, output = run_check(tmp_path, url, "--json")
    assert code == 0, output
    result = json.loads(output[output.index("{") :])
    assert result["ok"] and result["form"] == "json_object"
    (change,) = result["form_changes"]
    assert "rejected response_format json_schema" in change and "json_object" in change
    calls = {c["kind"]: c for c in result["calls"]}
    assert list(calls) == ["verify", "merge", "learn"]
    assert all(
        c["ok"] and (c["tokens_in"], c["tokens_out"]) == (TOKENS_IN, TOKENS_OUT)
        for c in calls.values()
    )
    assert calls["verify"]["answer"] == "reject"
    assert calls["merge"]["answer"] == "merge [1, 2]: Bob lives in Paris"
    assert calls["learn"]["answer"] == "1 memories: The user lives in Berlin"
    # one refused request (the json_schema probe), then one request per call
    assert len(script.requests) == 4


def test_check_shows_each_failure_as_what_it_is_and_exits_11(tmp_path: Path) -> None:
    steps = [
        Reply("I think they are the same."),
        Refuse(500, "model crashed: out of memory"),
        Die(),
    ]
    script = Script("openai", steps=steps)  # type: ignore[arg-type]
    with serve(script) as url:
        code, output = run_check(tmp_path, url)
    assert code == 11, output
    flat = " ".join(output.split())
    assert "malformed verify answer" in flat
    assert "answered HTTP 500: model crashed: out of memory" in flat
    assert "closed the connection without an answer" in flat
    assert "Connection error" not in flat


def test_check_without_an_llm_names_the_setting(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["llm", "check", "--home", str(tmp_path)])
    assert result.exit_code == 5 and "llm.provider" in result.output
