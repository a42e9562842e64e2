"""The OpenAI-compatible embeddings provider against a real HTTP server on 127.0.0.1
(tests/embedding_server.py), driven by the real ``openai`` SDK: batching, the key, dimensions,
retries, timeouts, failures (nothing written), the e5 prefixes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from embedding_server import Script, Slow, Status, WrongDimension, serve
from memlane import MemoryEngine, Settings
from memlane.config import EmbeddingSettings
from memlane.embeddings import embedder_from_settings, openai_compat
from memlane.errors import ConfigError, EmbeddingError, EmbeddingMismatch

pytest.importorskip("openai")


@pytest.fixture
def script() -> Script:
    return Script(dimension=64)


@pytest.fixture
def base_url(script: Script) -> Iterator[str]:
    with serve(script) as url:
        yield url


def _embedding(base_url: str, **over: Any) -> dict[str, Any]:
    return {
        "provider": "openai",
        "model": over.pop("model", "test-embed"),
        "base_url": base_url,
        "dimensions": over.pop("dimensions", 64),
        "timeout_s": over.pop("timeout_s", 5.0),
        "max_retries": over.pop("max_retries", 0),
        **over,
    }


def _settings(tmp_path: Any, base_url: str, **over: Any) -> Settings:
    return Settings.load(tmp_path, embedding=_embedding(base_url, **over))


def _engine(tmp_path: Any, base_url: str, **over: Any) -> MemoryEngine:
    return MemoryEngine.open(home=tmp_path, settings=_settings(tmp_path, base_url, **over))


def test_memories_are_embedded_by_the_server_and_found(
    tmp_path: Any, base_url: str, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_compat, "MAX_INPUTS", 2)  # small batches, to see them
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-test-123")
    with _engine(tmp_path, base_url, api_key_env="TEST_EMBED_KEY") as engine:
        texts = [
            "Alice prefers dark mode in every editor",
            "Bob drinks green tea every afternoon",
            "The billing service moved to PostgreSQL",
        ]
        results = engine.add_many([{"content": t} for t in texts])
        assert [r.decision.value for r in results] == ["added"] * 3
        hits = engine.search("green tea in the afternoon", limit=1, mode="vector")
        assert hits[0].memory.content == texts[1]
        assert engine.store.model == "openai:test-embed"  # recorded: another model is refused
    stored = [t for batch in script.inputs for t in batch]
    assert set(texts) <= set(stored)
    assert all(len(batch) <= 2 for batch in script.inputs)  # batched at MAX_INPUTS
    request = script.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["headers"]["authorization"] == "Bearer sk-test-123"
    assert request["json"]["model"] == "test-embed" and request["json"]["dimensions"] == 64

    with pytest.raises(EmbeddingMismatch, match="openai:test-embed"):
        MemoryEngine.open(home=tmp_path, settings=_settings(tmp_path, base_url, model="other"))


@pytest.mark.parametrize(
    ("steps", "over", "message"),
    [
        ([Status(500)], {}, "Error code: 500"),
        ([Status(401)], {"max_retries": 3}, "Error code: 401"),  # not retried
        ([Slow(2.0)], {"timeout_s": 0.3}, "timed out"),
        ([WrongDimension()], {}, "65-dim vectors"),
    ],
)
def test_a_failed_call_writes_nothing(
    tmp_path: Any,
    base_url: str,
    script: Script,
    steps: list[Any],
    over: dict[str, Any],
    message: str,
) -> None:
    with _engine(tmp_path, base_url, **over) as engine:
        engine.add("Carol keeps bees on the roof")  # one memory before
        script.steps.extend(steps)
        with pytest.raises(EmbeddingError, match=message) as info:
            engine.add_many([{"content": "Dave plays the cello"}, {"content": "Erin runs"}])
        assert "Nothing was written" in str(info.value) or "dim" in message
        assert [m.content for m in engine.list()] == ["Carol keeps bees on the roof"]
    if over.get("max_retries"):
        assert len(script.requests) == 2  # the memory before, and one call: a 401 is final


def test_retries_then_succeeds(tmp_path: Any, base_url: str, script: Script) -> None:
    script.steps.extend([Status(500), Status(429)])
    with _engine(tmp_path, base_url, max_retries=2) as engine:
        assert engine.add("Frank collects stamps").decision.value == "added"
    assert len(script.requests) == 3  # two failures retried by the SDK


def test_e5_models_get_their_prefixes(tmp_path: Any, base_url: str, script: Script) -> None:
    script.dimension = 384
    with _engine(
        tmp_path, base_url, model="intfloat/multilingual-e5-small", dimensions=None
    ) as engine:
        engine.add("Gina speaks Portuguese")
        engine.search("which languages does Gina speak", mode="vector")
        # the e5 profile's thresholds apply (its scale, not MiniLM's)
        assert engine.settings.dedup.gray_low > 0.85
    stored, query = script.inputs[0], script.inputs[-1]
    assert stored == ["passage: Gina speaks Portuguese"]
    assert query == ["query: which languages does Gina speak"]
    assert "dimensions" not in script.requests[0]["json"]  # not set: not sent


def test_settings_errors_name_the_key(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    no_key = EmbeddingSettings(provider="openai", model="text-embedding-3-small")
    with pytest.raises(ConfigError, match=r"embedding\.api_key_env"):
        embedder_from_settings(no_key)
    unknown = EmbeddingSettings(provider="openai", model="mystery", base_url="http://x/v1")
    with pytest.raises(ConfigError, match=r"embedding\.dimensions"):
        embedder_from_settings(unknown)
    known = EmbeddingSettings(
        provider="openai", model="text-embedding-3-small", base_url="http://x/v1"
    )
    assert embedder_from_settings(known).dimension == 1536
    with pytest.raises(ConfigError, match=r"api_key"):
        Settings.load(tmp_path, embedding={"provider": "openai", "model": "m", "api_key": "sk"})
