"""The LLM providers against real HTTP servers on 127.0.0.1 (tests/llm_server.py), driven by the
real ``openai`` and ``anthropic`` SDKs: normal answers, a slow answer past the timeout, 429 and
500 answers, malformed JSON; settings; counters."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_server import TOKENS_IN, TOKENS_OUT, Raw, Reply, Script, Slow, Status, serve
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


def test_an_answer_in_a_code_fence_is_accepted(kind: str, script: Script, base_url: str) -> None:
    script.steps = [Reply(f"Here you go:\n```json\n{MERGE}\n```")]
    assert provider(kind, base_url).verify_duplicate("a", "b").action == "merge"


def test_a_slow_answer_past_the_timeout_fails_fast(
    kind: str, script: Script, base_url: str
) -> None:
    script.steps = [Slow(3.0, MERGE)]
    llm = provider(kind, base_url, timeout_s=0.4)
    start = time.monotonic()
    with pytest.raises(LLMError, match="failed on verify"):
        llm.verify_duplicate("a", "b")
    assert time.monotonic() - start < 2.5
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


def test_a_server_without_json_schema_is_asked_with_json_object() -> None:
    """llama-cpp-python's server takes ``response_format`` ``text`` or ``json_object`` only: the
    provider switches to ``json_object`` (schema without length limits) and stays there."""
    from llm_server import Refuse

    refusal = "Input should be 'text' or 'json_object', input: 'json_schema'"
    ok = json.dumps({"action": "keep", "merged_text": None, "reasoning": "x"})
    script = Script("openai", steps=[Refuse(500, refusal), Reply(ok), Reply(ok)])
    with serve(script) as url:
        llm = make_llm(LLMSettings(provider="openai", model="m", base_url=url, max_retries=0))
        assert llm is not None
        assert llm.verify_duplicate("a", "b").action == "keep"
        assert llm.verify_duplicate("c", "d").action == "keep"
    formats = [r["json"]["response_format"] for r in script.requests]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert "maxLength" in json.dumps(formats[0]) and "maxLength" not in json.dumps(formats[1])
