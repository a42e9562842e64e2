"""The scope rule (``memlane.scope``): one owner rule for every door (library, CLI, HTTP API,
pages, MCP, hooks) and the project identity of a repository (remote URL, else root commit,
else path), the same for its worktrees and fresh clones."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _commit(repo: Path, message: str, *args: str) -> None:
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
         "--allow-empty", "-m", message, *args)  # fmt: skip


def test_the_root_commit_is_cached_per_head_so_git_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hooks' identity cache: after the first call no git process is needed (git is
    taken off PATH: without the cache the identity would fall back to the folder), a new
    HEAD with another root is seen at once, a remote added later wins, a moved repository
    keeps its identity, and a fresh ``git init`` needs no git either."""
    repo = _repo(tmp_path / "shop")
    root = _git(repo, "rev-list", "--max-parents=0", "HEAD")
    cache = tmp_path / "home" / "cache" / "roots.json"
    assert project_identity(repo, cache=cache) == f"commit:{root}"  # git ran once
    no_git = str(tmp_path / "empty-bin")
    os.mkdir(no_git)
    with_git = os.environ["PATH"]
    monkeypatch.setenv("PATH", no_git)
    assert project_identity(repo) == f"path:{repo.resolve()}"  # no cache, no git: the folder
    assert project_identity(repo / ".", cache=cache) == f"commit:{root}"  # the cache answers
    monkeypatch.setenv("PATH", with_git)
    _git(repo, "pack-refs", "--all")  # the branch now in packed-refs, not a loose file
    _git(repo, "checkout", "-q", "--orphan", "other")
    _commit(repo, "another root")
    other = _git(repo, "rev-list", "--max-parents=0", "HEAD")
    assert other != root
    assert project_identity(repo, cache=cache) == f"commit:{other}"  # HEAD moved: asked again
    _git(repo, "checkout", "-q", "main")  # back to a HEAD seen before, in packed-refs
    wt = tmp_path / "shop-wt"
    _git(repo, "worktree", "add", "-q", str(wt), "-b", "feature")  # HEAD: main's commit
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    _git(fresh, "init", "-q")
    monkeypatch.setenv("PATH", no_git)
    assert project_identity(repo, cache=cache) == f"commit:{root}"
    assert project_identity(wt / ".", cache=cache) == f"commit:{root}"  # its own HEAD file
    assert project_identity(fresh, cache=cache) == f"path:{fresh.resolve()}"  # no commit: no git
    moved = tmp_path / "moved-shop"
    repo.rename(moved)  # the moved repository keeps its identity (the key is the commit)
    assert project_identity(moved, cache=cache) == f"commit:{root}"
    monkeypatch.setenv("PATH", with_git)
    _git(moved, "remote", "add", "origin", "git@github.com:acme/shop.git")
    monkeypatch.setenv("PATH", no_git)
    assert project_identity(moved, cache=cache) == "github.com/acme/shop"  # a new remote wins


def test_a_broken_cache_file_is_no_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "svc")
    root = _git(repo, "rev-list", "--max-parents=0", "HEAD")
    cache = tmp_path / "roots.json"
    cache.write_text("{not json", encoding="utf-8")
    assert project_identity(repo, cache=cache) == f"commit:{root}"
    assert project_identity(repo, cache=cache) == f"commit:{root}"  # written anew
    assert json.loads(cache.read_text(encoding="utf-8")) == {root: root}  # HEAD -> root


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_the_owner_schema_pattern_admits_only_names_check_owner_accepts(name: str) -> None:
    """The HTTP API's schema states the owner rule (OpenAPI ``pattern``): a client generating
    names from it (schemathesis does) never meets a 422 for a name the pattern allows, and the
    invisible characters check_owner refuses are outside the pattern."""
    import re

    from memlane.scope import check_owner, owner_pattern

    pattern = re.compile(_PATTERN.setdefault("owner", owner_pattern()))
    if pattern.match(name):
        check_owner(name)  # no ScopeError
    for bad in ("a\x01b", "a\u200bb", "\u202eevil", "x\ufeff"):
        assert not pattern.match(bad)
        with pytest.raises(ScopeError):
            check_owner(bad)


_PATTERN: dict[str, str] = {}
