"""Settings: memlane.toml + MEMLANE_* env, validation that names key/value/allowed, per-agent
overrides."""

from __future__ import annotations

import re
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memlane import ConfigError, MemoryType, Settings
from memlane.config import resolve_home


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "memlane.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_design(tmp_path: Path) -> None:
    s = Settings.load(tmp_path)
    inj = s.injection
    assert (inj.enabled, inj.search_limit, inj.max_total) == (True, 20, 25)
    assert (inj.semantic_threshold, inj.context_window_depth) == (0.85, 10)
    assert (inj.ambient_enabled, inj.pinned_types, inj.pinned_limit) == (False, (), 3)
    assert (inj.pinned_sort, inj.max_injected_blocks_in_history) == ("recent", 3)
    assert s.dedup.max_chars == 50_000
    assert s.dedup.gray_low <= s.dedup.replace <= s.dedup.auto_reject
    assert s.retrieval.rrf_k == 60
    assert s.embedding.provider == "local" and s.embedding.model == "all-MiniLM-L6-v2"
    assert s.db_path == tmp_path.resolve() / "memlane.db"
    assert s.agents == {}


def test_home_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path / "from-env"))
    assert resolve_home() == (tmp_path / "from-env").resolve()
    assert resolve_home(tmp_path / "explicit") == (tmp_path / "explicit").resolve()
    monkeypatch.delenv("MEMLANE_HOME")
    assert resolve_home() == (Path.home() / ".memlane").resolve()
    write(tmp_path / "from-env", "[injection]\nmax_total = 4\n")
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path / "from-env"))
    assert Settings.load().injection.max_total == 4
    assert not (tmp_path / "explicit").exists()  # loading creates nothing


def test_file_then_env_then_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path,
        """
        [dedup]
        gray_low = 0.9
        replace = 0.96
        [injection]
        max_total = 7
        search_limit = 11
        [store]
        path = "data/mem.db"
        """,
    )
    s = Settings.load(tmp_path)
    assert (s.dedup.gray_low, s.dedup.replace, s.injection.max_total) == (0.9, 0.96, 7)
    assert s.db_path == tmp_path.resolve() / "data" / "mem.db"

    monkeypatch.setenv("MEMLANE_INJECTION__MAX_TOTAL", "9")
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    s = Settings.load(tmp_path)
    assert s.injection.max_total == 9  # env beats the file
    assert s.injection.search_limit == 11  # the rest of the section still comes from the file
    assert s.dedup.gray_low == 0.9
    assert s.embedding.provider == "hash"

    s = Settings.load(tmp_path, injection={"max_total": 3})
    assert s.injection.max_total == 3  # explicit beats env


def test_env_pinned_types_comma_or_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("identity,goal", "identity, goal", '["identity", "goal"]'):
        monkeypatch.setenv("MEMLANE_INJECTION__PINNED_TYPES", value)
        assert Settings.load(tmp_path).injection.pinned_types == (
            MemoryType.IDENTITY,
            MemoryType.GOAL,
        )
    write(tmp_path, '[injection]\npinned_types = "preference"\n')
    monkeypatch.delenv("MEMLANE_INJECTION__PINNED_TYPES")
    assert Settings.load(tmp_path).injection.pinned_types == (MemoryType.PREFERENCE,)


def test_loads_in_threads_each_read_their_own_file(tmp_path: Path) -> None:
    homes = [tmp_path / f"home-{n}" for n in range(1, 9)]
    for n, home in enumerate(homes, start=1):
        write(home, f"[injection]\nmax_total = {n}\n")

    def load_often(home: Path) -> set[int]:
        return {Settings.load(home).injection.max_total for _ in range(25)}

    with ThreadPoolExecutor(len(homes)) as pool:
        assert list(pool.map(load_often, homes)) == [{n} for n in range(1, 9)]
    assert Settings().injection.max_total == 25  # outside load(): no file, the default


def test_settings_are_immutable(tmp_path: Path) -> None:
    s = Settings.load(tmp_path)
    with pytest.raises(ValueError):
        s.injection.max_total = 3  # type: ignore[misc]


# --- invalid values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "value", "allowed"),
    [
        ("[dedup]\nreplace = 1.5\n", "dedup.replace", 1.5, "less than or equal to 1"),
        ("[dedup]\ngray_low = -0.1\n", "dedup.gray_low", -0.1, "greater than or equal to 0"),
        ("[injection]\nsemantic_threshold = 2\n", "injection.semantic_threshold", 2, "1"),
        ("[dedup]\ngray_low = 0.975\n", "dedup.gray_low", 0.975, "dedup.replace (0.97)"),
        (
            "[dedup]\nreplace = 0.99\nauto_reject = 0.98\n",
            "dedup.replace",
            0.99,
            "dedup.auto_reject (0.98)",
        ),
        (
            '[injection]\npinned_types = ["identity", "opinion"]\n',
            "injection.pinned_types",
            ["identity", "opinion"],
            "valid types: identity, goal, decision, todo, preference, fact, event, observation",
        ),
        ('[injection]\npinned_sort = "oldest"\n', "injection.pinned_sort", "oldest", "recent"),
        ("[injection]\nmax_total = 0\n", "injection.max_total", 0, "greater than or equal to 1"),
        ('[injection]\nmax_total = "many"\n', "injection.max_total", "many", "integer"),
        ("[dedup]\nthresold = 0.9\n", "dedup.thresold", 0.9, "unknown setting"),
        ("[dedupe]\nreplace = 0.9\n", "dedupe", {"replace": 0.9}, "unknown setting"),
        ('[embedding]\nprovider = "cohere"\n', "embedding.provider", "cohere", "'local'"),
        ('[embedding]\nmodel = "bge-small"\n', "embedding.model", "bge-small", "all-MiniLM-L6-v2"),
        (
            "[agents.coder.injection]\nmax_total = 0\n",
            "agents.coder.injection.max_total",
            0,
            "greater than or equal to 1",
        ),
        (
            '[agents.coder.injection]\npinned_types = ["opinion"]\n',
            "agents.coder.injection.pinned_types",
            ["opinion"],
            "valid types: identity",
        ),
        (
            "[agents.coder.injection]\nmax_totl = 3\n",
            "agents.coder.injection.max_totl",
            3,
            "unknown setting",
        ),
        ("[agents.coder]\ncolour = 3\n", "agents.coder.colour", 3, "unknown setting"),
    ],
)
def test_invalid_file_values(
    tmp_path: Path, toml: str, key: str, value: object, allowed: str
) -> None:
    write(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        Settings.load(tmp_path)
    err = info.value
    assert err.key == key
    assert err.value == value
    assert allowed in err.allowed
    assert key in str(err) and repr(value) in str(err)


@pytest.mark.parametrize(
    ("env", "value", "key"),
    [
        ("MEMLANE_DEDUP__GRAY_LOW", "abc", "dedup.gray_low"),
        ("MEMLANE_DEDUP__REPLACE", "7", "dedup.replace"),
        ("MEMLANE_INJECTION__PINNED_TYPES", "identity,opinion", "injection.pinned_types"),
        ("MEMLANE_INJECTION__PINNED_TYPES", "[broken", "injection.pinned_types"),
        ("MEMLANE_AGENTS", "{not json", "MEMLANE_AGENTS"),
    ],
)
def test_invalid_env_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, value: str, key: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as info:
        Settings.load(tmp_path)
    assert info.value.key == key
    assert value in str(info.value)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[dedup\nreplace = ")
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        Settings.load(tmp_path)
    assert info.value.key == str(path)
    # one line: the file, the line and column, TOML's problem, the fix (not "invalid setting
    # /path = '<file>'")
    assert str(info.value) == (
        f"{path} is not valid TOML, line 1, column 7: Expected ']' at the end of a table "
        "declaration (fix the file; docs/configuration.md shows every setting)"
    )


def test_invalid_explicit_override(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"dedup\.gray_low"):
        Settings.load(tmp_path, dedup={"gray_low": 2})


# --- per-agent overrides -----------------------------------------------------------------------


def test_agent_override_applies_only_to_that_agent(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        [injection]
        max_total = 10
        [agents.coder.injection]
        max_total = 2
        ambient_enabled = true
        pinned_types = ["decision", "todo"]
        [agents.writer]
        """,
    )
    s = Settings.load(tmp_path)
    coder = s.injection_for("coder")
    assert coder.max_total == 2 and coder.ambient_enabled
    assert coder.pinned_types == (MemoryType.DECISION, MemoryType.TODO)
    assert coder.search_limit == s.injection.search_limit  # not overridden: the default
    for other in (None, "writer", "unknown-agent"):
        assert s.injection_for(other) == s.injection
    assert s.injection.max_total == 10 and not s.injection.ambient_enabled


def test_agent_override_inherits_global_file_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "[injection]\nsemantic_threshold = 0.7\n[agents.x.injection]\nmax_total = 1\n")
    monkeypatch.setenv("MEMLANE_INJECTION__CONTEXT_WINDOW_DEPTH", "4")
    x = Settings.load(tmp_path).injection_for("x")
    assert (x.max_total, x.semantic_threshold, x.context_window_depth) == (1, 0.7, 4)


def test_the_documented_example_states_the_defaults() -> None:
    """docs/configuration.md shows a memlane.toml: every value in it (except the per-agent
    example) is the default, so the page cannot drift from the code."""
    doc = (Path(__file__).parent.parent / "docs" / "configuration.md").read_text()
    example = tomllib.loads(re.search(r"```toml\n(.*?)```", doc, re.S).group(1))  # type: ignore[union-attr]
    example.pop("agents")
    defaults = Settings.load(Path("/nonexistent-memlane-home")).model_dump()
    checked = 0
    for section, values in example.items():
        for key, value in values.items():
            if (section, key) == ("store", "path"):
                continue  # the doc gives it relative to the home folder
            default = defaults[section][key]
            assert (list(default) if isinstance(default, tuple) else default) == value, key
            checked += 1
    assert checked >= 20
