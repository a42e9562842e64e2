"""Settings that cannot grant more than meant, and owner names that are one owner on every door
(issue #33, item 7): a token shared by two owners, an owner token equal to the server's, an
empty, over-long or invisible-character owner name are configuration errors (a running server
keeps its last good settings and shows the error); owner names are normalised (NFC) and
limited (128 characters, no control or zero-width character) on the library, the CLI and the
HTTP API alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import Backend
from memlane import MemoryEngine, Settings
from memlane.cli import app
from memlane.errors import ConfigError, InvalidArgument, InvalidMemory
from memlane.scope import MAX_OWNER_CHARS
from server_support import ADMIN, ALICE, auth, serve_app

NFC, NFD = "Jos\u00e9", "Jose\u0301"  # one name, two spellings
LOOK_ALIKE = "ali\u200bce"  # shows as "alice"


@pytest.mark.parametrize(
    ("tokens", "server_token", "said"),
    [
        ({"alice": "t-1", "bob": "t-2", "carol": "t-2"}, "", "'bob' and 'carol' share one token"),
        ({"alice": "t-admin", "bob": "t-2"}, "t-admin", "the token of 'alice' is the server's"),
        ({"": "t-1"}, "", "the owner name '' is empty"),
        ({"x" * (MAX_OWNER_CHARS + 1): "t-1"}, "", "over the limit of 128"),
        ({LOOK_ALIKE: "t-1"}, "", "invisible character U+200B"),
        ({NFC: "t-1", NFD: "t-2"}, "", "are one owner once normalised"),
    ],
)
def test_owner_tokens_that_grant_more_are_errors(
    tmp_path: Path, tokens: dict[str, str], server_token: str, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.load(tmp_path, server={"token": server_token, "owner_tokens": tokens})
    message = str(caught.value)
    assert "server.owner_tokens" in message and said in message, message
    assert all(t not in message for t in tokens.values()), "a token was echoed"


def test_a_running_server_keeps_its_good_tokens_when_the_file_shares_one(
    store_backend: Backend,
) -> None:
    home = store_backend.home
    good = '[server]\ntoken = "admin-token"\n[server.owner_tokens]\nalice = "alice-token"\n'
    (home / "memlane.toml").write_text(good + 'bob = "bob-token"\n')
    with serve_app(store_backend) as (client, state):
        pin = {"owner": "bob", "memory": {"content": "bob's pin 42"}}
        assert client.post("/v1/memories", json=pin, headers=auth(ADMIN)).status_code == 200
        # the file: carol given bob's token, alice the server's
        (home / "memlane.toml").write_text(
            '[server]\ntoken = "alice-token"\n[server.owner_tokens]\nalice = "alice-token"\n'
            'bob = "bob-token"\ncarol = "bob-token"\n'
        )
        assert state.reload() is False
        assert "the token of 'alice' is the server's token" in str(state.config_error)
        (home / "memlane.toml").write_text(good + 'bob = "bob-token"\ncarol = "bob-token"\n')
        assert state.reload() is False
        assert "'bob' and 'carol' share one token" in str(state.config_error)
        health = client.get("/health", headers=auth(ADMIN)).json()
        assert "share one token" in json.dumps(health), health
        # the last good settings stay: alice sees only alice, bob only bob, the admin all
        assert client.get("/v1/settings/injection", headers=auth(ALICE)).status_code == 404
        listed = client.get("/v1/memories", params={"owner": "alice"}, headers=auth(ALICE))
        assert listed.status_code == 200 and listed.json()["items"] == []
        bobs = client.get("/v1/memories", params={"owner": "bob"}, headers=auth("bob-token"))
        assert [m["content"] for m in bobs.json()["items"]] == ["bob's pin 42"]
        assert client.get("/v1/settings/injection", headers=auth(ADMIN)).status_code == 200


def test_owner_names_are_one_owner_on_every_door(store_backend: Backend) -> None:
    engine = store_backend.engine()
    added = engine.add("the kiwi cluster runs in eu-west", owner=NFD)
    assert added.memory.owner == NFC
    assert [m.id for m in engine.list(owner=NFC)] == [added.memory.id]
    assert [m.id for m in engine.list(owner=f"  {NFD} ")] == [added.memory.id]
    for bad, said in ((LOOK_ALIKE, r"U\+200B"), ("x" * 300_000, "over the limit of 128")):
        with pytest.raises(InvalidArgument, match=said):
            engine.list(owner=bad)
        with pytest.raises(InvalidMemory, match=said):
            engine.add("a memory of nobody", owner=bad)
    assert engine.counts() == [(NFC, "fact", "active", 1)]


def test_owner_names_over_http_and_the_cli(store_backend: Backend) -> None:
    with serve_app(store_backend) as (client, _):
        for bad in (LOOK_ALIKE, "x" * 300_000, "x" * 129, "tab\there"):
            done = client.post("/v1/memories", json={"owner": bad, "memory": {"content": "hi"}})
            assert done.status_code == 422, done.text
            assert "owner" in done.text
            if len(bad) < 1000:  # (a longer one is no URL httpx sends)
                got = client.get("/v1/memories", params={"owner": bad})
                assert got.status_code == 422 and "owner" in got.text, got.text
        ok = client.post("/v1/memories", json={"owner": NFD, "memory": {"content": "kiwi"}})
        assert ok.status_code == 200 and ok.json()["results"][0]["memory"]["owner"] == NFC
    env = store_backend.child_env()
    done = CliRunner().invoke(app, ["add", "kiwi", "--owner", LOOK_ALIKE], env=env)
    assert done.exit_code == 3 and "U+200B" in done.output, done.output
    listed = CliRunner().invoke(app, ["list", "--owner", NFC, "--json"], env=env)
    assert listed.exit_code == 0 and "kiwi" in listed.stdout, listed.output


def test_scope_owner_in_the_settings_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"scope\.owner"):
        Settings.load(tmp_path, scope={"owner": LOOK_ALIKE})
    assert Settings.load(tmp_path, scope={"owner": NFD}).scope.owner == NFC
    engine = MemoryEngine.open(tmp_path, Settings.load(tmp_path, embedding={"provider": "hash"}))
    engine.close()
