"""The scope rule in every door, on every backend: the CLI (``--project`` with a repository's
folder or an identity), the HTTP API (``project`` where ``owner`` is taken), MCP (``remember``'s
``scope``; the project of the server's working folder) and the hooks; and one owner rule
(explicit > ``[scope] owner`` > ``default``) so that a memory added with ``memlane add`` and no
owner is the one MCP and the hooks see, with ``[scope] owner`` set and unset."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner

from conftest import Backend
from hook_support import claude_payload, gemini_payload, run_hook
from memlane.cli import app
from server_support import serve_app

T = TypeVar("T")
APP_URL = "git@github.com:Acme/App.git"
APP = "github.com/acme/app"
API = "github.com/acme/api"
APP_FACT = "The app's deploy script lives in tools/ship.sh and needs the VPN"
API_FACT = "The api's deploy script lives in bin/release and needs a signed tag"
GLOBAL_FACT = "Alice prefers deploy scripts written in bash with set -euo pipefail"


def git_repo(path: Path, remote: str | None) -> Path:
    """A repository at ``path`` (with remote ``origin`` when given), no commit needed."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if remote:
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    (path / "src").mkdir()
    return path


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path]:
    """Two repositories: ``app`` (its identity from its SSH remote) and ``api``."""
    return (
        git_repo(tmp_path / "app", APP_URL),
        git_repo(tmp_path / "api", "https://github.com/acme/api.git"),
    )


class Cli:
    """``memlane`` in-process on ``backend``'s store (hash embedder), with ``env`` on top."""

    def __init__(self, backend: Backend, **env: str) -> None:
        self.env = {**backend.child_env(), **env}
        self.home = backend.home

    def __call__(self, *args: str, code: int = 0) -> Any:
        result = CliRunner().invoke(app, [*args, "--home", str(self.home)], env=self.env)
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


def contents(rows: Any) -> set[str]:
    return {r.get("memory", r)["content"] for r in rows}


# ------------------------------------------------------------------------------ CLI
def test_cli_project_by_folder_or_identity(
    store_backend: Backend, repos: tuple[Path, Path]
) -> None:
    app_dir, api_dir = repos
    cli = Cli(store_backend)
    added = cli.json("add", APP_FACT, "--project", str(app_dir / "src"))  # a folder inside it
    assert added["memory"]["project"] == APP  # the normalised remote URL, not the path
    assert cli.json("add", API_FACT, "--project", API)["memory"]["project"] == API  # identity
    assert cli.json("add", GLOBAL_FACT)["memory"]["project"] is None
    for where in (str(app_dir), APP):
        assert contents(cli.json("list", "--project", where)) == {APP_FACT, GLOBAL_FACT}
        hits = cli.json("search", "deploy script", "--project", where)
        assert contents(hits) == {APP_FACT, GLOBAL_FACT}
    assert contents(cli.json("list")) == {APP_FACT, API_FACT, GLOBAL_FACT}
    shown = cli.json("inject", "where is the deploy script?", "-s", "c1", "--project", str(api_dir))
    assert API_FACT in contents(shown["items"]) and APP_FACT not in contents(shown["items"])
    # the table says which project it lists
    assert "in project github.com/acme/app" in cli("list", "--project", APP).stdout


def test_cli_refuses_a_folder_outside_any_repository(
    store_backend: Backend, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = Cli(store_backend)("add", APP_FACT, "--project", str(plain), code=3)
    assert "not inside a git repository" in result.stderr
    assert Cli(store_backend).json("list") == []


def test_cli_owner_rule(store_backend: Backend) -> None:
    cli = Cli(store_backend)
    assert cli.json("add", APP_FACT)["memory"]["owner"] == "default"
    (store_backend.home / "memlane.toml").write_text('[scope]\nowner = "carol"\n')
    assert cli.json("add", API_FACT)["memory"]["owner"] == "carol"
    assert contents(cli.json("list")) == {API_FACT}  # reads follow the rule too
    assert contents(cli.json("list", "--owner", "default")) == {APP_FACT}  # explicit wins
    env = Cli(store_backend, MEMLANE_SCOPE__OWNER="dave")
    assert env.json("add", GLOBAL_FACT)["memory"]["owner"] == "dave"


# ------------------------------------------------------------------------------ HTTP
def test_http_project_where_owner_is_taken(store_backend: Backend) -> None:
    with serve_app(store_backend) as (client, _):
        for body in (
            {"project": APP, "memory": {"content": APP_FACT}},
            {"project": API, "memories": [{"content": API_FACT}]},
            {"memory": {"content": GLOBAL_FACT}},
        ):
            resp = client.post("/v1/memories", json=body)
            assert resp.status_code == 200, resp.text
            memory = resp.json()["results"][0]["memory"]
            assert memory["project"] == body.get("project")
            page = client.get(f"/memories/{memory['id']}").text  # the memory's page says it
            assert (body.get("project") or "global: seen in every project") in page
        listed = client.get("/v1/memories", params={"project": APP}).json()["items"]
        assert contents(listed) == {APP_FACT, GLOBAL_FACT}
        assert len(client.get("/v1/memories").json()["items"]) == 3
        hits = client.post("/v1/search", json={"query": "deploy script", "project": API})
        assert contents(hits.json()["hits"]) == {API_FACT, GLOBAL_FACT}
        shown = client.post(
            "/v1/inject", json={"session": "h1", "text": "the deploy script?", "project": APP}
        ).json()
        assert APP_FACT in contents(shown["items"]) and API_FACT not in contents(shown["items"])
        for bad in ("", "   ", "x" * 501):
            resp = client.post("/v1/search", json={"query": "deploy", "project": bad})
            assert resp.status_code == 422, resp.text
            assert client.get("/v1/memories", params={"project": bad}).status_code == 422
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        assert "project" in schema["SearchRequest"]["properties"]
        assert "project" in schema["InjectRequest"]["properties"]


def test_http_and_pages_follow_the_owner_rule(store_backend: Backend) -> None:
    with serve_app(store_backend, scope={"owner": "carol"}) as (client, _):
        resp = client.post("/v1/memories", json={"memory": {"content": APP_FACT}})
        assert resp.json()["results"][0]["memory"]["owner"] == "carol"
        assert contents(client.get("/v1/memories").json()["items"]) == {APP_FACT}
        other = {"owner": "default", "memory": {"content": API_FACT}}
        assert client.post("/v1/memories", json=other).status_code == 200
        # the pages open on the rule's owner, not on whichever owner has the most memories
        page = client.get("/memories").text
        assert APP_FACT.replace("'", "&#39;") in page and "bin/release" not in page
    with serve_app(store_backend) as (client, _):  # no [scope] owner: "default"
        assert contents(client.get("/v1/memories").json()["items"]) == {API_FACT}


# ------------------------------------------------------------------------------ MCP
def mcp_call(backend: Backend, cwd: Path, fn: Callable[[Any], Awaitable[T]], **env: str) -> T:
    """Start ``memlane mcp`` on stdio in ``cwd`` (the client's project), run ``fn``."""
    pytest.importorskip("mcp", reason="needs the mcp extra")
    from mcp_support import with_session

    return with_session({**backend.child_env(), **env}, fn, cwd)


def tool_data(result: Any) -> Any:
    from mcp_support import data

    return data(result)


def test_mcp_remember_scope_and_project_reads(
    store_backend: Backend, repos: tuple[Path, Path]
) -> None:
    app_dir, api_dir = repos

    async def write_in_app(s: Any) -> Any:
        kept = tool_data(await s.call_tool("remember", {"content": APP_FACT}))
        wide = tool_data(await s.call_tool("remember", {"content": GLOBAL_FACT, "scope": "global"}))
        listed = tool_data(await s.call_tool("list_memories", {}))
        return kept, wide, listed

    kept, wide, listed = mcp_call(store_backend, app_dir / "src", write_in_app)
    assert kept["memory"]["project"] == APP  # the default inside a repository: the project
    assert wide["memory"]["project"] is None
    assert {m["content"] for m in listed["memories"]} == {APP_FACT, GLOBAL_FACT}

    async def read_in_api(s: Any) -> Any:
        found = tool_data(await s.call_tool("recall", {"query": "deploy script", "limit": 10}))
        turn = tool_data(
            await s.call_tool(
                "context_for_turn", {"session": "m1", "text": "how do I run the deploy script?"}
            )
        )
        return found, turn

    found, turn = mcp_call(store_backend, api_dir, read_in_api)
    assert {m["content"] for m in found["memories"]} == {GLOBAL_FACT}  # not the app's
    assert APP_FACT not in (turn["block"] or "")


def test_a_cli_memory_without_owner_reaches_mcp_and_the_hooks(
    store_backend: Backend, repos: tuple[Path, Path]
) -> None:
    """``memlane add`` with no owner, then MCP and the hooks (no owner of their own), with
    ``[scope] owner`` unset (``default``) and set (``carol``): each time the same memory."""
    app_dir, _ = repos
    for configured in (None, "carol"):
        env = {} if configured is None else {"MEMLANE_SCOPE__OWNER": configured}
        fact = f"The release train leaves on Thursdays ({configured or 'unset'})"
        cli = Cli(store_backend, **env)
        assert cli.json("add", fact)["memory"]["owner"] == (configured or "default")

        async def recall(s: Any) -> Any:
            return tool_data(await s.call_tool("recall", {"query": "release train Thursdays"}))

        found = mcp_call(store_backend, app_dir, recall, **env)
        assert fact in {m["content"] for m in found["memories"]}
        hook_env = {**store_backend.child_env(), "MEMLANE_HOOKS__URL": "http://127.0.0.1:9", **env}
        hook_env["MEMLANE_HOOKS__AUTOSTART"] = "false"
        prompt = "when does the release train leave?"
        for client, payload in (
            ("claude-code", claude_payload("UserPromptSubmit", f"c-{configured}", app_dir, prompt=prompt)),
            ("gemini", gemini_payload("BeforeAgent", f"g-{configured}", app_dir, prompt=prompt)),
        ):  # fmt: skip
            event = "UserPromptSubmit" if client == "claude-code" else "BeforeAgent"
            printed = run_hook(hook_env, event, payload, "--client", client)
            assert fact in printed.stdout, (client, printed)


def test_two_assistants_in_one_repository_share_it_and_another_does_not_see_it(
    store_backend: Backend, repos: tuple[Path, Path]
) -> None:
    app_dir, api_dir = repos
    Cli(store_backend).json("add", APP_FACT, "--project", str(app_dir))
    env = {**store_backend.child_env(), "MEMLANE_HOOKS__URL": "http://127.0.0.1:9"}
    env["MEMLANE_HOOKS__AUTOSTART"] = "false"
    prompt = "where is the deploy script?"
    in_app = [
        run_hook(env, "UserPromptSubmit",
                 claude_payload("UserPromptSubmit", "c1", app_dir / "src", prompt=prompt)),
        run_hook(env, "BeforeAgent",
                 gemini_payload("BeforeAgent", "g1", app_dir, prompt=prompt), "--client", "gemini"),
    ]  # fmt: skip
    for printed in in_app:
        assert "tools/ship.sh" in printed.stdout, printed
    in_api = run_hook(
        env, "UserPromptSubmit", claude_payload("UserPromptSubmit", "c2", api_dir, prompt=prompt)
    )
    assert "tools/ship.sh" not in in_api.stdout
