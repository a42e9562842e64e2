"""What every framework adapter shares (memlane.integrations._base): importing memlane brings no
framework, an adapter refuses a framework version without its seam with a message that names
the supported range, and the client answers the same over a ``memlane serve`` URL as on an
engine in the process."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlane.integrations._base import (
    Scope,
    UnsupportedFramework,
    find_session,
    last_user_turn,
    require,
)
from version_support import assert_refused

SRC = Path(__file__).resolve().parents[1] / "src"
#: The frameworks' top-level modules (none may load with ``import memlane``).
FRAMEWORK_MODULES = ("langchain", "langgraph", "pydantic_ai", "agents", "llama_index", "crewai")


def test_importing_memlane_and_its_integrations_package_loads_no_framework() -> None:
    code = "import memlane, memlane.integrations, json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "memlane.integrations._base" in loaded
    assert [m for m in loaded if m.split(".")[0] in FRAMEWORK_MODULES] == []


def test_a_version_outside_the_range_is_refused_naming_the_range() -> None:
    found = importlib.metadata.version("pydantic")
    with pytest.raises(UnsupportedFramework) as caught:
        require("pydantic", "99.0", "100", "pydantic-ai")
    message = str(caught.value)
    assert f"pydantic {found} is not supported" in message
    assert ">=99.0,<100" in message and "pip install 'memlane[pydantic-ai]'" in message
    assert require("pydantic", "2.0", "3", "x") == found


#: ``require(dist, "1.54", "2", ...)`` on each reported version: accepted or refused (PEP 440).
VERSIONS = [
    ("1.54", True),
    ("1.100.0", True),  # numbers, not text: 100 > 54
    ("1.62.0+vendor.3", True),  # a local version counts as its public one
    ("1.62.0.post1", True),
    ("1.60.0rc1", True),  # a pre-release inside the range
    ("1.60.0.dev3", True),
    ("1.53.9", False),
    ("1.54.0rc1", False),  # comes before 1.54
    ("2.0.0rc1", False),  # a pre-release of the upper bound
    ("2.0.0.dev1", False),
    ("2.0.0", False),
    ("2.0.0+vendor", False),
    ("1!1.60", False),  # an epoch is later than every version without one
    ("custom-build", False),  # not PEP 440
]


@pytest.mark.parametrize(("version", "accepted"), VERSIONS, ids=[v for v, _ in VERSIONS])
def test_the_range_is_read_as_pep_440(
    monkeypatch: pytest.MonkeyPatch, version: str, accepted: bool
) -> None:
    """What ``require`` documents: local versions count as their public one, pre-releases
    inside the range are accepted, those of either bound are not, nor is a version that is not
    PEP 440; a refusal is the one message users read."""
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda d: version if d == "some-framework" else real(d)
    )
    if accepted:
        assert require("some-framework", "1.54", "2", "x") == version
        return
    with pytest.raises(UnsupportedFramework) as caught:
        require("some-framework", "1.54", "2", "x")
    assert str(caught.value) == (
        f"some-framework {version} is not supported: memlane's adapter needs some-framework "
        ">=1.54,<2; pip install 'memlane[x]' (supported: some-framework >=1.54,<2)"
    )


def test_a_framework_not_installed_is_named() -> None:
    with pytest.raises(UnsupportedFramework, match="no-such-framework is not installed"):
        require("no-such-framework", "1.0", "2", "x")


def test_the_turn_of_a_conversation_is_its_last_user_message_and_their_count() -> None:
    pairs = [("system", "s"), ("user", "hi"), ("assistant", "yo"), ("tool", "t"), ("user", "more")]
    assert last_user_turn(pairs) == ("more", 2)
    assert last_user_turn([("system", "s")]) is None


def test_scope_takes_the_run_context_over_the_adapter_and_never_makes_an_owner() -> None:
    base = Scope(owner=None, project="p")
    assert base.of({"user_id": "alice"}) == Scope("alice", "p", None)
    assert base.of(None) == base
    assert base.of({}) == Scope(None, "p", None)  # memlane's own scope rule decides
    assert find_session({"thread_id": "t"}, "fallback") == "t"
    assert find_session({}, None) is None


def test_a_doors_run_key_names_its_turns_instead_of_the_position(tmp_path: Path) -> None:
    """``Door.text(key=...)`` (CrewAI: every run rebuilds its messages, so every user message is
    at position 1): each run is its own turn and a later call of a run a repeat (the same
    text); by position alone the second run would read as a shrunk history and reset the
    session (one turn record left)."""
    from fw_support import DEPLOY, PROJECT, TABS, TURNS, open_engine
    from memlane.integrations._base import Door

    engine = open_engine(tmp_path)
    try:
        door = Door(
            engine, owner="alice", project=PROJECT, agent=None, session=None, token=None,
            source="t", hint="h",
        )  # fmt: skip

        def text(session: str, message: str, key: str | None) -> str | None:
            return door.text([("user", message)], session=session, context=None, key=key)

        first = text("keyed", TURNS[0], "run-1")
        assert first is not None and DEPLOY in first and TABS not in first
        assert text("keyed", TURNS[0], "run-1") == first  # the tool loop's later call
        second = text("keyed", TURNS[1], "run-2")
        assert second is not None and second.count(DEPLOY) == 1 and second.count(TABS) == 1
        assert len(engine.store.session_turns("alice", "keyed")) == 2
        text("by-position", TURNS[0], None)
        text("by-position", TURNS[1], None)
        assert len(engine.store.session_turns("alice", "by-position")) == 1  # reset
    finally:
        engine.close()


#: Each adapter module, its distribution, a version without its seam, its range and extra.
ADAPTERS = [
    ("memlane.integrations.langchain", "langchain", "1.0.0", "1.1", "2", "langchain"),
    ("memlane.integrations.langgraph_store", "langgraph", "0.6.11", "1.0", "2", "langchain"),
    ("memlane.integrations.openai_agents", "openai-agents", "0.13.6", "0.14", "1", "openai-agents"),
    ("memlane.integrations.pydantic_ai", "pydantic-ai-slim", "1.107.10", "2.0", "3", "pydantic-ai"),
    (
        "memlane.integrations.llamaindex",
        "llama-index-core",
        "0.12.35",
        "0.12.36",
        "0.15",
        "llamaindex",
    ),
]


@pytest.mark.parametrize(
    ("module", "dist", "old", "low", "high", "extra"), ADAPTERS, ids=[a[1] for a in ADAPTERS]
)
def test_an_adapter_refuses_a_version_without_its_seam(
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    dist: str,
    old: str,
    low: str,
    high: str,
    extra: str,
) -> None:
    """Importing the adapter with ``dist`` reported at ``old`` fails, naming the version, the
    range and the extra (tests/version_support.py)."""
    assert_refused(monkeypatch, module, dist=dist, version=old, low=low, high=high, extra=extra)
