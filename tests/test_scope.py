"""The scope rule (``memlane.scope``): one owner rule for every door (library, CLI, HTTP API,
pages, MCP, hooks) and the project identity of a repository (remote URL, else root commit,
else path), the same for its worktrees and fresh clones."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memlane.hooks.config import load_config
from memlane.scope import (
    DEFAULT_OWNER,
    ScopeError,
    normalise_remote,
    project_identity,
    resolve_owner,
    resolve_project,
)

FACT = "The deploy script lives in tools/ship.sh and needs the VPN"


def test_the_rule_explicit_then_configured_then_default() -> None:
    assert resolve_owner("alice", "carol") == "alice"
    assert resolve_owner(None, "carol") == "carol"
    assert resolve_owner("", " carol ") == "carol"
    assert resolve_owner(None, "") == resolve_owner(None, None) == DEFAULT_OWNER == "default"


def test_the_hooks_follow_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert load_config(home).scope("claude-code", None)[0] == "default"
    (home / "memlane.toml").write_text('[scope]\nowner = "carol"\n', encoding="utf-8")
    assert load_config(home).scope("claude-code", None)[0] == "carol"
    monkeypatch.setenv("MEMLANE_SCOPE__OWNER", "dave")
    assert load_config(home).scope("gemini", None)[0] == "dave"
    monkeypatch.setenv("MEMLANE_HOOKS__OWNER", "erin")
    assert load_config(home).scope("gemini", None)[0] == "erin"  # the hooks' explicit owner


# ------------------------------------------------------------------------------ project
def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
         "--allow-empty", "-m", "root")  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("git@github.com:Acme/App.git", "github.com/acme/app"),
        ("https://github.com/acme/app", "github.com/acme/app"),
        ("https://user@GitHub.com:443/acme/app.git/", "github.com/acme/app"),
        ("ssh://git@github.com/acme/app.git", "github.com/acme/app"),
    ],
)
def test_remote_urls_of_one_repository_agree(url: str, want: str) -> None:
    assert normalise_remote(url) == want


def test_project_identity_remote_then_root_commit_then_path(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "shop")
    root = _git(repo, "rev-list", "--max-parents=0", "HEAD")
    (repo / "src").mkdir()
    assert project_identity(repo / "src") == f"commit:{root}"
    # a worktree and a clone of the same repository: the same project
    _git(repo, "worktree", "add", "-q", str(tmp_path / "shop-wt"), "-b", "feature")
    assert project_identity(tmp_path / "shop-wt") == f"commit:{root}"
    _git(tmp_path, "clone", "-q", str(repo), str(tmp_path / "moved"))
    clone_id = project_identity(tmp_path / "moved")
    assert clone_id == f"path:{repo.resolve()}"  # the clone's origin is the first folder
    _git(repo, "remote", "add", "origin", "git@github.com:acme/shop.git")
    assert (
        project_identity(repo) == project_identity(tmp_path / "shop-wt") == ("github.com/acme/shop")
    )
    empty = tmp_path / "fresh"
    empty.mkdir()
    _git(empty, "init", "-q")
    assert project_identity(empty) == f"path:{empty.resolve()}"
    assert project_identity(tmp_path) is None


def test_resolve_project_takes_a_folder_or_an_identity(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "svc")
    _git(repo, "remote", "add", "origin", "https://git.example.com/team/svc.git")
    assert resolve_project(str(repo)) == "git.example.com/team/svc"
    assert resolve_project("github.com/acme/app") == "github.com/acme/app"
    assert resolve_project(None) is None and resolve_project("") is None
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ScopeError, match="not inside a git repository"):
        resolve_project(str(plain))
