"""The LLM providers against real HTTP servers on 127.0.0.1 (tests/llm_server.py), driven by the
real ``openai`` and ``anthropic`` SDKs: normal answers, a slow answer past the timeout, 429 and
500 answers, malformed JSON; settings; counters."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_server import (
    LLAMA_CPP,
    LLAMA_CPP_REFUSAL,
    NO_TOOLS,
    NO_TOOLS_NO_PREFILL,
    TEXT_ONLY,
    TOKENS_IN,
    TOKENS_OUT,
    Die,
    Held,
    Raw,
    Refuse,
    Reply,
    Script,
    Status,
    serve,
)
from memlane import Settings
from memlane.config import LLMSettings
from memlane.errors import ConfigError, LLMError
from memlane.llm import make_llm
from memlane.llm.prompts import VERIFY_VERSION
from memlane.llm.providers import ChatLLM

pytest.importorskip("openai")
pytest.importorskip("anthropic")

KINDS = ["openai", "anthropic"]
MERGE = json.dumps(
    {"action": "merge", "merged_text": "Alice likes tea and green tea", "reasoning": "same"}
)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def script(kind: str) -> Script:
    return Script(kind)  # type: ignore[arg-type]


@pytest.fixture
def base_url(script: Script) -> Iterator[str]:
    with serve(script) as url:
        yield url


def provider(kind: str, base_url: str, **over: Any) -> ChatLLM:
    settings = LLMSettings(
        provider=kind,  # type: ignore[arg-type]
        model="test-model",
        base_url=base_url,
        timeout_s=over.pop("timeout_s", 5.0),
        max_retries=over.pop("max_retries", 0),
        **over,
    )
    llm = make_llm(settings)
    assert isinstance(llm, ChatLLM)
    return llm


def test_a_normal_answer_becomes_a_verdict_and_is_counted(
    kind: str, script: Script, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test-123")
    script.steps = [Reply(MERGE)]
    llm = provider(kind, base_url, api_key_env="TEST_LLM_KEY")
    verdict = llm.verify_duplicate("Alice likes tea", "Alice likes green tea")
    assert verdict.action == "merge"
    assert verdict.merged_text == "Alice likes tea and green tea"
    assert verdict.prompt_version == VERIFY_VERSION
    (req,) = script.requests
    body = req["json"]
    assert body["model"] == "test-model" and body["temperature"] == 0
    prompt = json.dumps(body)
    assert "Alice likes tea" in prompt and "Alice likes green tea" in prompt
    # the key comes from the named variable
    key_header = req["headers"].get("authorization", "") + req["headers"].get("x-api-key", "")
    assert "sk-test-123" in key_header
    stats = llm.stats.as_dict()
    assert stats["calls"] == 1 and stats["failures"] == 0
    assert (stats["tokens_in"], stats["tokens_out"]) == (TOKENS_IN, TOKENS_OUT)


def test_openai_asks_for_a_json_schema() -> None:
    script = Script("openai")
    script.steps = [Reply(MERGE)]
    with serve(script) as url:
        provider("openai", url).verify_duplicate("a b", "a b c")
    fmt = script.requests[0]["json"]["response_format"]
    assert fmt["type"] == "json_schema"
    assert "action" in fmt["json_schema"]["schema"]["properties"]


#: A server of each kind that answers in plain text only.
PLAIN = {"openai": TEXT_ONLY, "anthropic": NO_TOOLS_NO_PREFILL}


@pytest.mark.parametrize(
    "wrapped",
    [
        "Here you go:\n```json\n{answer}\n```",
        "{answer}\nI hope this helps {{the model rambles}}",
        "Thinking {{not json}} ... {answer}",
    ],
)
def test_a_text_answer_around_its_json_is_accepted(kind: str, wrapped: str) -> None:
    """Plain text (the weakest form): the first JSON object in it is the answer."""
    script = Script(kind, steps=[Reply(wrapped.format(answer=MERGE))], refuse=PLAIN[kind])  # type: ignore[arg-type]
    with serve(script) as url:
        llm = provider(kind, url)
        assert llm.verify_duplicate("a", "b").action == "merge"
        assert llm.form == "text"


def test_a_slow_answer_past_the_timeout_fails_fast(
    kind: str, script: Script, base_url: str
) -> None:
    held = Held(MERGE)
    script.steps = [held]
    llm = provider(kind, base_url, timeout_s=0.4)
    with pytest.raises(LLMError, match="failed on verify"):
        llm.verify_duplicate("a", "b")
    # It gave up while the answer was still held back (the answer comes only on release or
    # after 30 s): the timeout ended the call, not the server.
    assert not held.answered.is_set()
    held.release()
    assert llm.stats.as_dict()["failures"] == 1


def test_a_429_is_retried_and_then_answered(kind: str, script: Script, base_url: str) -> None:
    script.steps = [Status(429), Reply(MERGE)]
    llm = provider(kind, base_url, max_retries=2)
    assert llm.verify_duplicate("a", "b").action == "merge"
    assert len(script.requests) == 2


@pytest.mark.parametrize("code", [429, 500])
def test_an_error_status_without_retries_left_is_an_llm_error(
    kind: str, script: Script, base_url: str, code: int
) -> None:
    script.default = Status(code)
    llm = provider(kind, base_url, max_retries=1)
    with pytest.raises(LLMError, match=str(code)):
        llm.verify_duplicate("a", "b")
    assert len(script.requests) == 2  # the first try and one retry
    assert llm.stats.as_dict() == {**llm.stats.as_dict(), "calls": 1, "failures": 1}


@pytest.mark.parametrize(
    "text",
    [
        "not json at all",
        '{"action": "merge"',  # cut off
        '{"action": "maybe", "reasoning": "?"}',  # not one of the actions
        '{"reasoning": "no action"}',
    ],
)
def test_a_malformed_answer_is_an_llm_error_not_a_crash(
    kind: str, script: Script, base_url: str, text: str
) -> None:
    script.steps = [Reply(text)]
    llm = provider(kind, base_url)
    with pytest.raises(LLMError, match="malformed verify answer"):
        llm.verify_duplicate("a", "b")
    assert llm.stats.as_dict()["failures"] == 1


def test_a_broken_http_body_is_an_llm_error(kind: str, script: Script, base_url: str) -> None:
    script.steps = [Raw("{this is not json")]
    with pytest.raises(LLMError):
        provider(kind, base_url).verify_duplicate("a", "b")


# --- settings -----------------------------------------------------------------------------------


def write_toml(home: Path, text: str) -> None:
    (home / "memlane.toml").write_text(text, encoding="utf-8")


def test_a_key_written_in_the_file_is_a_config_error(tmp_path: Path) -> None:
    write_toml(tmp_path, '[llm]\nprovider = "openai"\nmodel = "m"\napi_key = "sk-secret"\n')
    with pytest.raises(ConfigError, match="api_key_env") as info:
        Settings.load(tmp_path)
    assert info.value.key == "llm.api_key"
    assert "sk-secret" not in str(info.value)  # the error never echoes the secret


def test_a_provider_without_a_model_is_a_config_error(tmp_path: Path) -> None:
    write_toml(tmp_path, '[llm]\nprovider = "anthropic"\n')
    with pytest.raises(ConfigError, match="model"):
        Settings.load(tmp_path)


def test_an_unknown_provider_is_a_config_error(tmp_path: Path) -> None:
    write_toml(tmp_path, '[llm]\nprovider = "gemini"\nmodel = "m"\n')
    with pytest.raises(ConfigError, match=r"llm\.provider"):
        Settings.load(tmp_path)


def test_an_unset_key_variable_without_base_url_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    settings = LLMSettings(provider="openai", model="m", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_VAR"):
        make_llm(settings)


def test_full_llm_settings_load_from_the_file(tmp_path: Path) -> None:
    write_toml(
        tmp_path,
        '[llm]\nprovider = "openai"\nmodel = "qwen"\nbase_url = "http://127.0.0.1:1/v1"\n'
        'api_key_env = "MY_KEY"\ntimeout_s = 3\nmax_retries = 1\n',
    )
    llm = Settings.load(tmp_path).llm
    assert (llm.provider, llm.model, llm.timeout_s, llm.max_retries, llm.temperature) == (
        "openai",
        "qwen",
        3.0,
        1,
        0.0,
    )


def test_no_provider_means_no_llm() -> None:
    assert make_llm(LLMSettings()) is None


def test_import_memlane_loads_no_llm_sdk() -> None:
    code = "import memlane, memlane.cli, sys; print([m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic')])"
    src = str(Path(__file__).resolve().parents[1] / "src")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": src, "PATH": ""},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_call_is_logged_with_model_tokens_and_latency(
    kind: str, script: Script, base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    script.steps = [Reply(MERGE), Status(500)]
    llm = provider(kind, base_url)
    with caplog.at_level(logging.INFO, logger="memlane.llm"):
        llm.verify_duplicate("a", "b")
        with pytest.raises(LLMError):
            llm.verify_duplicate("a", "b")
    ok, failed = [r.getMessage() for r in caplog.records if r.name == "memlane.llm"]
    assert "model=test-model" in ok and f"tokens_in={TOKENS_IN}" in ok
    assert f"tokens_out={TOKENS_OUT}" in ok and "latency_s=" in ok and "ok=True" in ok
    assert "ok=False" in failed


def test_a_provider_whose_sdk_is_missing_names_the_extra_to_install(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, kind, None)  # ``import kind`` now raises ImportError
    with pytest.raises(ConfigError) as err:
        make_llm(LLMSettings(provider=kind, model="m", base_url="http://127.0.0.1:9"))  # type: ignore[arg-type]
    assert "llm.provider" in str(err.value) and "memlane[llm]" in str(err.value)


def test_a_server_without_json_schema_is_asked_with_json_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """llama-cpp-python's server answers 500 to ``json_schema``: the endpoint moves to
    ``json_object`` (the schema in the prompt and as ``schema``) once, logged with the server's
    words, and stays there; no call fails for it."""
    ok = json.dumps({"action": "keep", "merged_text": None, "reasoning": "x"})
    script = Script("openai", steps=[Reply(ok), Reply(ok)], refuse=LLAMA_CPP)
    with serve(script) as url, caplog.at_level(logging.WARNING, logger="memlane.llm"):
        llm = provider("openai", url)
        assert llm.verify_duplicate("a", "b").action == "keep"
        assert llm.verify_duplicate("c", "d").action == "keep"
        again = provider("openai", url)  # a new provider for the same server knows it already
        assert again.form == "json_object"
    formats = [r["json"]["response_format"] for r in script.requests]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert "action" in formats[1]["schema"]["properties"]
    assert "maxLength" not in json.dumps(formats)  # llama.cpp cannot compile a grammar from it
    system = script.requests[1]["json"]["messages"][0]["content"]
    assert '"action"' in system and "JSON schema" in system
    assert llm.stats.as_dict()["failures"] == 0 and llm.stats.as_dict()["refused"] == 0
    (change,) = llm.form_changes()
    assert (change.refused, change.now) == ("json_schema", "json_object")
    line = change.line()
    assert "rejected response_format json_schema" in line
    assert "Input should be 'text' or 'json_object'" in line and "\n" not in line
    assert any(line in r.getMessage() for r in caplog.records)


def test_a_server_without_response_format_is_asked_in_text() -> None:
    ok = json.dumps({"action": "reject", "merged_text": None, "reasoning": "same"})
    script = Script("openai", steps=[Reply(f"Sure! {ok}")], refuse=TEXT_ONLY)
    with serve(script) as url:
        llm = provider("openai", url)
        assert llm.verify_duplicate("a", "b").action == "reject"
    forms = [r["json"].get("response_format", {}).get("type", "text") for r in script.requests]
    assert forms == ["json_schema", "json_object", "text"]
    assert "response_format" not in script.requests[-1]["json"]
    assert "JSON schema" in script.requests[-1]["json"]["messages"][0]["content"]
    assert [c.now for c in llm.form_changes()] == ["json_object", "text"]


def test_anthropic_asks_with_a_forced_tool_and_reads_its_input() -> None:
    script = Script("anthropic", steps=[Reply(MERGE)])
    with serve(script) as url:
        verdict = provider("anthropic", url).verify_duplicate("a b", "a b c")
    assert verdict.action == "merge" and verdict.merged_text == "Alice likes tea and green tea"
    body = script.requests[0]["json"]
    (tool,) = body["tools"]
    assert body["tool_choice"] == {"type": "tool", "name": tool["name"]}
    assert "action" in tool["input_schema"]["properties"]


@pytest.mark.parametrize(
    ("refuse", "forms"),
    [(NO_TOOLS, ["tool_use", "prefill"]), (NO_TOOLS_NO_PREFILL, ["tool_use", "prefill", "text"])],
)
def test_anthropic_without_tools_falls_back_to_a_prefill_then_text(
    refuse: dict[str, Refuse], forms: list[str]
) -> None:
    script = Script("anthropic", steps=[Reply(MERGE)], refuse=refuse)
    with serve(script) as url:
        llm = provider("anthropic", url)
        assert llm.verify_duplicate("a", "b").action == "merge"
    from llm_server import form_of

    assert [form_of("anthropic", r["json"]) for r in script.requests] == forms
    assert llm.form == forms[-1] and llm.stats.as_dict()["failures"] == 0


def test_a_refusal_that_is_not_about_the_form_is_a_true_error() -> None:
    """A 400 about something else (the model) is reported as it is, no form is dropped."""
    script = Script("openai", default=Refuse(400, "model 'nope' not found, try pulling it first"))
    with serve(script) as url:
        llm = provider("openai", url)
        with pytest.raises(LLMError) as err:
            llm.verify_duplicate("a", "b")
    assert len(script.requests) == 1 and llm.form == "json_schema"
    msg = str(err.value)
    assert f"the server at {url} answered HTTP 400: model 'nope' not found" in msg
    assert "check llm.model" in msg and "Connection error" not in msg
    assert llm.stats.as_dict()["refused"] == 1


def test_a_500_is_reported_with_the_servers_message_not_as_a_connection_error() -> None:
    script = Script("openai", default=Refuse(500, "llama_decode failed: KV cache is full"))
    with serve(script) as url, pytest.raises(LLMError) as err:
        provider("openai", url).verify_duplicate("a", "b")
    assert "HTTP 500: llama_decode failed: KV cache is full (the server failed: see its log)" in (
        str(err.value)
    )


def test_the_llama_cpp_refusal_on_the_last_form_is_reported_as_it_is() -> None:
    """A server that refuses every form: the last refusal is the error, on one line."""
    refuse = {**TEXT_ONLY, "text": Refuse(500, LLAMA_CPP_REFUSAL)}
    script = Script("openai", refuse=refuse)
    with serve(script) as url, pytest.raises(LLMError) as err:
        provider("openai", url).verify_duplicate("a", "b")
    assert "answered HTTP 500: 1 validation error" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_server_that_dies_is_reported_as_closing_the_connection(kind: str) -> None:
    script = Script(kind, default=Die())  # type: ignore[arg-type]
    with serve(script) as url, pytest.raises(LLMError) as err:
        provider(kind, url).verify_duplicate("a", "b")
    msg = str(err.value)
    assert f"the server at {url.rstrip('/')} closed the connection without an answer" in msg
    assert "Connection error" not in msg


def test_nothing_listening_is_reported_as_such(kind: str) -> None:
    from server_support import free_port

    url = f"http://127.0.0.1:{free_port()}" + ("/v1" if kind == "openai" else "")
    with pytest.raises(LLMError) as err:
        provider(kind, url).verify_duplicate("a", "b")
    assert f"nothing answers at {url}: start the server, or fix llm.base_url" in str(err.value)


def test_a_malformed_answer_says_where_and_what_it_was(kind: str) -> None:
    script = Script(kind, steps=[Reply('{"action": "maybe", "reasoning": "?"}')])  # type: ignore[arg-type]
    with serve(script) as url:
        llm = provider(kind, url)
        with pytest.raises(LLMError) as err:
            llm.verify_duplicate("a", "b")
    msg = str(err.value)
    assert "malformed verify answer (literal_error at action" in msg and "maybe" in msg
    stats = llm.stats.as_dict()
    assert stats["malformed"] == 1 and stats["refused"] == 0
    assert stats["by_kind"]["verify"] == {
        "calls": 1,
        "failures": 1,
        "tokens_in": TOKENS_IN,
        "tokens_out": TOKENS_OUT,
    }


def test_the_schema_in_the_prompt_has_no_references() -> None:
    """A small model copies what it reads: the prompt's schema has its definitions inlined
    (SmolLM2-135M answered ``#/$defs/LearnedMemory`` as a memory's text)."""
    learned = json.dumps({"memories": [{"content": "Bob lives in Paris", "type": "fact"}]})
    script = Script("openai", steps=[Reply(learned)], refuse=LLAMA_CPP)
    with serve(script) as url:
        memories = provider("openai", url).extract_memories("user: I live in Paris")
    assert [m.content for m in memories] == ["Bob lives in Paris"]
    system = script.requests[-1]["json"]["messages"][0]["content"]
    assert "$ref" not in system and "$defs" not in system and '"content"' in system
    assert "$ref" in json.dumps(script.requests[-1]["json"]["response_format"]["schema"])
