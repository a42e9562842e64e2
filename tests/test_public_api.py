"""The public API: what ``memlane`` exports, immutable values, the decision strings, the error
hierarchy, and nothing happening at import time."""

from __future__ import annotations

import dataclasses
import enum
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import memlane
import memlane.errors
import memlane.history
import memlane.types
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


def test_every_exported_name_imports_and_is_documented() -> None:
    assert len(set(memlane.__all__)) == len(memlane.__all__)
    namespace: dict[str, object] = {}
    exec("from memlane import *", namespace)  # what a user's star import gets
    assert set(memlane.__all__) <= set(namespace)
    for name in memlane.__all__:
        obj = getattr(memlane, name)
        if isinstance(obj, type) and not issubclass(obj, enum.Enum):
            assert obj.__module__.startswith("memlane."), name
            assert (vars(obj).get("__doc__") or "").strip(), f"{name} has no docstring"


def _public_classes(module: ModuleType) -> set[str]:
    return {
        name
        for name, obj in vars(module).items()
        if isinstance(obj, type) and obj.__module__ == module.__name__ and not name.startswith("_")
    }


@pytest.mark.parametrize("module", [memlane.errors, memlane.types], ids=["errors", "types"])
def test_every_error_and_value_type_is_exported(module: ModuleType) -> None:
    """What the API raises and returns can be caught or annotated from ``memlane`` itself."""
    missing = _public_classes(module) - set(memlane.__all__)
    assert not missing, f"not exported from memlane: {sorted(missing)}"


def test_engine_entry_points_are_exported() -> None:
    # The names the README and the package docstring start from.
    for name in ("MemoryEngine", "MemoryInput", "Settings", "INJECTION_BLOCK_PREFIX"):
        assert name in memlane.__all__
    assert memlane.INJECTION_BLOCK_PREFIX == memlane.history.INJECTION_BLOCK_PREFIX


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
        "janitor_merge",
    ]
    duplicates = {d.value for d in Decision if d.duplicate}
    assert duplicates == {
        "hash_exact",
        "auto_reject",
        "replaced",
        "llm_merge",
        "llm_reject",
        "fallback_reject",
        "janitor_merge",
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
        "kept_apart",  # a reviewed pair the janitor must never merge again (docs/dedup.md)
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
    "Turn",
    "TurnBlock",
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


def test_an_unknown_type_is_named_with_the_valid_ones_everywhere(engine: MemoryEngine) -> None:
    valid = "valid types: identity, goal, decision, todo, preference, fact, event, observation"
    with pytest.raises(InvalidMemory, match="unknown type 'opinion'; " + valid):
        engine.add("Tabs are better than spaces", type="opinion")
    with pytest.raises(InvalidArgument, match="unknown type 'opinion'; " + valid):
        engine.list(type="opinion")
    with pytest.raises(InvalidArgument, match="unknown type 'opinion'; " + valid):
        engine.search("tabs", types=["fact", "opinion"])
    assert engine.count() == 0


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
