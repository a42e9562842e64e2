"""Settings over HTTP: the global injection defaults and per-agent overrides, written to
memlane.toml atomically with its comments kept and used by the next call; hot reload of hand
edits; an invalid file keeps the last good settings and /health says why."""

from __future__ import annotations

import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from conftest import Backend
from memlane.config import Settings
from memlane.engine import MemoryEngine
from memlane.server.state import ServerState
from server_support import serve_app

COMMENTED = """# memlane settings of the test operator
[dedup]
gray_low = 0.8  # calibrated on the dev pairs

[injection]
# how many hits to consider
search_limit = 20
"""


@pytest.fixture
def api(store_backend: Backend) -> Iterator[tuple[TestClient, ServerState]]:
    (store_backend.home / "memlane.toml").write_text(COMMENTED, encoding="utf-8")
    with serve_app(store_backend) as pair:
        yield pair


def toml_file(state: ServerState) -> str:
    return state.path.read_text(encoding="utf-8")


def test_get_defaults(api: tuple[TestClient, ServerState]) -> None:
    body = api[0].get("/v1/settings/injection").json()
    assert body["agent"] is None and body["overridden"] is False
    assert body["settings"]["semantic_threshold"] == 0.85


def test_put_defaults_writes_the_file_keeps_comments_and_is_used(
    api: tuple[TestClient, ServerState],
) -> None:
    client, state = api
    resp = client.put("/v1/settings/injection", json={"semantic_threshold": 0.9})
    assert resp.status_code == 200
    assert resp.json()["settings"]["semantic_threshold"] == 0.9
    text = toml_file(state)
    assert "# memlane settings of the test operator" in text
    assert "# calibrated on the dev pairs" in text and "# how many hits to consider" in text
    assert tomllib.loads(text)["injection"]["semantic_threshold"] == 0.9
    assert state.engine.injector.settings_for(None).semantic_threshold == 0.9
    assert Settings.load(state.home).injection.semantic_threshold == 0.9


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"semantic_threshold": 1.5}, "semantic_threshold"),
        ({"pinned_types": ["rumour"]}, "pinned_types"),
        ({"search_limit": "many"}, "search_limit"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_put_is_422_naming_the_field_and_writes_nothing(
    api: tuple[TestClient, ServerState], body: dict[str, object], field: str
) -> None:
    client, state = api
    resp = client.put("/v1/settings/injection", json=body)
    assert resp.status_code == 422
    assert field in resp.json()["detail"]
    assert toml_file(state) == COMMENTED
    assert client.get("/v1/settings/injection").json()["settings"]["search_limit"] == 20


def test_agent_override_then_revert(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    before = client.get("/v1/agents/coder/settings/injection").json()
    assert before["overridden"] is False
    resp = client.put("/v1/agents/coder/settings/injection", json={"max_total": 3})
    assert resp.json()["overridden"] is True and resp.json()["overrides"] == {"max_total": 3}
    assert resp.json()["settings"]["max_total"] == 3
    assert tomllib.loads(toml_file(state))["agents"]["coder"]["injection"] == {"max_total": 3}
    assert state.engine.injector.settings_for("coder").max_total == 3
    assert state.engine.injector.settings_for("other").max_total == 25
    reverted = client.delete("/v1/agents/coder/settings/injection").json()
    assert reverted["overridden"] is False and reverted["settings"]["max_total"] == 25
    assert "agents" not in tomllib.loads(toml_file(state))
    assert "# calibrated on the dev pairs" in toml_file(state)


def test_agent_names_are_checked(api: tuple[TestClient, ServerState]) -> None:
    resp = api[0].put("/v1/agents/bad%20name/settings/injection", json={"max_total": 3})
    assert resp.status_code == 422


def test_the_next_inject_uses_a_new_setting(api: tuple[TestClient, ServerState]) -> None:
    client, _ = api
    client.post("/v1/memories", json={"memory": {"content": "The staging database is Postgres"}})
    client.put("/v1/settings/injection", json={"enabled": False})
    body = {"session": "s", "text": "which staging database is Postgres?"}
    resp = client.post("/v1/inject", json=body).json()
    assert resp["block"] is None and resp["skipped"] == {"disabled": 1}


def test_hand_edit_is_reloaded(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    state.path.write_text(COMMENTED.replace("search_limit = 20", "search_limit = 7"))
    assert state.check_file() is True
    assert client.get("/v1/settings/injection").json()["settings"]["search_limit"] == 7


def test_invalid_hand_edit_keeps_last_good_settings_and_health_says_why(
    api: tuple[TestClient, ServerState],
) -> None:
    client, state = api
    state.path.write_text(COMMENTED.replace("search_limit = 20", "search_limit = -4"))
    assert state.check_file() is False
    health = client.get("/health").json()
    assert health["status"] == "ready"
    assert "injection.search_limit" in health["config_error"]
    assert client.get("/v1/settings/injection").json()["settings"]["search_limit"] == 20
    state.path.write_text(COMMENTED.replace("search_limit = 20", "search_limit = 9"))
    assert state.check_file() is True
    assert client.get("/health").json()["config_error"] is None


def test_watcher_thread_reloads_a_hand_edit(api: tuple[TestClient, ServerState]) -> None:
    client, state = api
    state.start_watching(interval=0.05)
    try:
        state.path.write_text(COMMENTED.replace("search_limit = 20", "search_limit = 11"))
        deadline = time.monotonic() + 10  # bounded wait; not a timing assertion
        while state.settings.injection.search_limit != 11 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get("/v1/settings/injection").json()["settings"]["search_limit"] == 11
    finally:
        state.stop_watching()


def test_reload_settings_rebuilds_components_but_keeps_the_store(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    engine.add("kept across a reload")
    store = engine.store
    new = Settings.load(tmp_path, injection={"max_total": 2}, dedup={"gray_low": 0.5})
    used = engine.reload_settings(new)
    assert engine.store is store and engine.count() == 1
    assert engine.injector.settings_for(None).max_total == 2
    assert engine.writer.settings.gray_low == 0.5
    assert used.store == engine.settings.store and used.store != new.store
