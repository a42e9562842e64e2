"""The public API: what ``memlane`` exports, immutable values, the decision strings, the error
hierarchy, and nothing happening at import time."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import memlane
from memlane import (
    ConfigError,
    Decision,
    EmbeddingError,
    EmbeddingMismatch,
    HashEmbedder,
    InvalidArgument,
    InvalidMemory,
    LLMError,
    MemlaneError,
    MemoryEngine,
    NotFound,
    Settings,
    StoreError,
)

EXPORTED = [
    "INJECTION_BLOCK_PREFIX",
    "LLM",
    "Association",
    "ConfigError",
    "Decision",
    "DedupLogEntry",
    "Embedder",
    "EmbeddingError",
    "EmbeddingMismatch",
    "HashEmbedder",
    "InjectedItem",
    "Injection",
    "InvalidArgument",
    "InvalidMemory",
    "LLMError",
    "LLMVerdict",
    "LocalEmbedder",
    "MemlaneError",
    "Memory",
    "MemoryEngine",
    "MemoryInput",
    "MemoryType",
    "MemoryVersion",
    "NotFound",
    "Relation",
    "ResetReason",
    "SearchHit",
    "SessionState",
    "Settings",
    "Status",
    "StoreError",
    "WriteResult",
    "__version__",
]


def test_exported_members() -> None:
    # Like httpx's test_exported_members: adding or removing a public name is a deliberate act.
    assert memlane.__all__ == EXPORTED
    for name in memlane.__all__:
        assert getattr(memlane, name) is not None
        obj = getattr(memlane, name)
        if isinstance(obj, type) and name != "__version__":
            assert obj.__module__.startswith("memlane."), name


def test_version() -> None:
    assert isinstance(memlane.__version__, str) and memlane.__version__.count(".") == 2


def test_decision_strings() -> None:
    assert [d.value for d in Decision] == [
        "added",
        "hash_exact",
        "auto_reject",
        "replaced",
        "gray_keep",
        "guard_keep",
        "llm_merge",
        "llm_reject",
        "llm_keep",
        "fallback_reject",
        "fallback_keep",
    ]
    duplicates = {d.value for d in Decision if d.duplicate}
    assert duplicates == {
        "hash_exact",
        "auto_reject",
        "replaced",
        "llm_merge",
        "llm_reject",
        "fallback_reject",
    }
    assert Decision("gray_keep") == "gray_keep"


def test_other_enums() -> None:
    assert [t.value for t in memlane.MemoryType] == [
        "identity",
        "goal",
        "decision",
        "todo",
        "preference",
        "fact",
        "event",
        "observation",
    ]
    assert [r.value for r in memlane.ResetReason] == ["compact", "clear", "resume"]
    assert {r.value for r in memlane.Relation} == {
        "related_to",
        "updates",
        "contradicts",
        "caused_by",
        "result_of",
        "part_of",
    }
    assert [s.value for s in memlane.Status] == ["active", "forgotten", "superseded"]


VALUE_TYPES = [
    "Association",
    "DedupLogEntry",
    "InjectedItem",
    "Injection",
    "LLMVerdict",
    "Memory",
    "MemoryInput",
    "MemoryVersion",
    "SearchHit",
    "SessionState",
    "WriteResult",
]


@pytest.mark.parametrize("name", VALUE_TYPES)
def test_values_are_frozen_dataclasses(name: str) -> None:
    cls = getattr(memlane, name)
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[union-attr]


def test_values_cannot_be_changed(engine: MemoryEngine) -> None:
    result = engine.add("Alice prefers dark mode")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.memory.content = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.decision = Decision.ADDED  # type: ignore[misc]
    data = result.to_dict()
    assert data["decision"] == "added"
    assert data["memory"]["content"] == "Alice prefers dark mode"
    assert isinstance(data["memory"]["created_at"], str)


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (InvalidMemory, (ValueError,)),
        (InvalidArgument, (ValueError,)),
        (NotFound, (LookupError,)),
        (ConfigError, (ValueError,)),
        (EmbeddingError, ()),
        (EmbeddingMismatch, (EmbeddingError,)),
        (StoreError, ()),
        (LLMError, ()),
    ],
)
def test_error_hierarchy(error: type[Exception], bases: tuple[type[Exception], ...]) -> None:
    assert issubclass(error, MemlaneError)
    for base in bases:
        assert issubclass(error, base)


def test_not_found_message_is_plain() -> None:
    assert str(NotFound("no memory with id 'x'")) == "no memory with id 'x'"


def test_config_error_names_key_value_allowed() -> None:
    err = ConfigError("dedup.replace", 1.5, "must be <= 1")
    assert (err.key, err.value, err.allowed) == ("dedup.replace", 1.5, "must be <= 1")
    assert str(err) == "invalid setting dedup.replace = 1.5: must be <= 1"


def test_engine_open_and_context_manager(tmp_path: Path) -> None:
    settings = Settings.load(tmp_path, embedding={"provider": "hash"})
    with MemoryEngine.open(settings=settings) as engine:
        engine.add("Alice prefers dark mode")
        assert isinstance(engine.embedder, HashEmbedder)
    assert (tmp_path / "memlane.db").is_file()
    with MemoryEngine.open(tmp_path, embedder=HashEmbedder()) as engine:
        assert engine.count() == 1
    with pytest.raises(StoreError):  # closed
        engine.add("more")


def test_engine_open_reads_home_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    with MemoryEngine.open() as engine:
        engine.add("stored under MEMLANE_HOME")
    assert (tmp_path / "h" / "memlane.db").is_file()


def test_nothing_happens_at_import(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code = (
        "import sys, memlane, memlane.cli\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') "
        "if m in sys.modules]\n"
        "print(heavy)\n"
    )
    env = {"MEMLANE_HOME": str(home), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"  # no model loaded
    assert not home.exists()  # no file created
