"""Memories that older hooks stored under a per-project agent reach the project scope, on both
backends, and a session in the repository finds them afterwards:

- ``<agent>@<project identity>``: moved by the store's migration when the store opens;
- ``<agent>@<folder>-<6 hex of its path>`` (the oldest form, a hash that only the repository
  can match): moved by ``memlane hooks migrate PATH``.

"Finds them" is what a user sees: the real ``memlane hook UserPromptSubmit`` (a process, the
payload on stdin, the session's cwd in the repository) prints the memory; before the move it
did not.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from conftest import Backend
from hook_support import OWNER, claude_payload, hook_env, run_hook
from memlane.hooks.legacy import legacy_suffix, migrate
from memlane.scope import git_root

DB = "The staging database is PostgreSQL 16 with pgvector, listening on port 5433"
BLOG = "The blog deploys from the gh-pages branch every night"
ASK = "Which database does the staging environment use?"
SHOP = "github.com/acme/shop"


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin",
                    "git@github.com:Acme/Shop.git"], check=True)  # fmt: skip
    return path


def hook_block(backend: Backend, repo: Path, session: str) -> str:
    """What Claude Code's UserPromptSubmit hook injects for :data:`ASK` in ``repo``."""
    done = run_hook(hook_env(backend), "UserPromptSubmit",
                    claude_payload("UserPromptSubmit", session, repo, prompt=ASK))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.context() or ""


def _forget_migration(backend: Backend) -> None:
    """Make the store look like one opened last by a release before the agents' migration."""
    if backend.name == "sqlite":
        conn = sqlite3.connect(backend.home / "memlane.db")
        try:
            conn.execute("DELETE FROM migrations WHERE name = '0006_agent_suffix_projects'")
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM migrations WHERE name = '0004_agent_suffix_projects'")


def test_an_agent_named_after_a_project_identity_moves_to_that_project_on_open(
    store_backend: Backend, tmp_path: Path
) -> None:
    """A store as an older release left it: a memory under ``claude-code@github.com/acme/shop``
    (the hook of this repository does not see it: not its agent, not its project). Opened
    by this release (the migration not applied yet), it belongs to the project, agent
    ``claude-code``, and the hook injects it."""
    repo = make_repo(tmp_path / "shop")
    engine = store_backend.engine()
    mid = engine.add(DB, owner=OWNER, agent="claude-code").memory.id
    oldest = engine.add(BLOG, owner=OWNER, agent="claude-code@blog-1a2b3c").memory.id
    plain = engine.add("Alice reviews pull requests on Fridays", owner=OWNER, agent="gemini")
    store_backend.close_all()
    _set_agent(store_backend, mid, f"claude-code@{SHOP}")
    assert DB not in hook_block(store_backend, repo, "before")  # as the older store was
    _forget_migration(store_backend)
    engine = store_backend.engine()  # opening migrates
    moved = engine.get(mid, owner=OWNER)
    assert (moved.content, moved.agent, moved.project) == (DB, "claude-code", SHOP)
    # the oldest form names no identity: left as it was; other agents untouched
    kept = engine.get(oldest, owner=OWNER)
    assert (kept.agent, kept.project) == ("claude-code@blog-1a2b3c", None)
    again = engine.get(plain.memory.id, owner=OWNER)
    assert (again.agent, again.project) == ("gemini", None)
    store_backend.close_all()
    assert DB in hook_block(store_backend, repo, "after")


def _set_agent(backend: Backend, memory_id: str, agent: str) -> None:
    if backend.name == "sqlite":
        conn = sqlite3.connect(backend.home / "memlane.db")
        try:
            conn.execute("UPDATE memories SET agent = ? WHERE id = ?", (agent, memory_id))
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        conn.execute("UPDATE memories SET agent = %s WHERE id = %s", (agent, memory_id))


def memlane(backend: Backend, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memlane", *args], env=backend.child_env(),
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_hooks_migrate_moves_the_oldest_form_given_the_repository(
    store_backend: Backend, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "shop")
    root = git_root(repo)
    assert root is not None
    old_agent = f"claude-code@{legacy_suffix(root)}"  # what the oldest hooks named it
    engine = store_backend.engine()
    mid = engine.add(DB, owner=OWNER, agent=old_agent).memory.id
    other = engine.add(BLOG, owner=OWNER, agent="claude-code@blog-1a2b3c").memory.id
    engine.close()
    store_backend.close_all()
    assert DB not in hook_block(store_backend, repo, "before")

    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    refused = memlane(store_backend, "hooks", "migrate", str(repo), str(outside), "--owner", OWNER)
    assert refused.returncode == 3 and "not inside a git repository" in refused.stderr
    done = memlane(store_backend, "hooks", "migrate", str(repo / "src" / ".."), "--owner",
                   OWNER, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"agent": old_agent, "new_agent": "claude-code", "project": SHOP, "count": 1}
    ]
    engine = store_backend.engine()
    moved, untouched = engine.get(mid, owner=OWNER), engine.get(other, owner=OWNER)
    assert (moved.agent, moved.project) == ("claude-code", SHOP)
    assert (untouched.agent, untouched.project) == ("claude-code@blog-1a2b3c", None)
    store_backend.close_all()
    assert DB in hook_block(store_backend, repo, "after")
    twice = memlane(store_backend, "hooks", "migrate", str(repo), "--owner", OWNER, "--json")
    assert (twice.returncode, json.loads(twice.stdout)) == (0, [])


def test_a_move_reaches_the_search_caches_of_an_open_engine(
    store_backend: Backend, tmp_path: Path
) -> None:
    """The engine searched before the move (its caches hold the old agent); right after it,
    the same engine finds the memory in the project under the plain agent, by both legs."""
    repo = make_repo(tmp_path / "shop")
    root = git_root(repo)
    assert root is not None
    engine = store_backend.engine()
    engine.add(DB, owner=OWNER, agent=f"gemini@{legacy_suffix(root)}")
    engine.add(BLOG, owner=OWNER)

    def found(mode: str) -> list[str]:
        hits = engine.search(ASK, owner=OWNER, agent="gemini", project=SHOP, limit=5, mode=mode)
        return [h.memory.content for h in hits]

    assert DB not in found("vector") + found("fts")
    (moved,) = migrate(engine, repo, owner=OWNER)
    assert (moved.new_agent, moved.project, moved.count) == ("gemini", SHOP, 1)
    assert found("vector")[0] == DB and found("fts")[0] == DB
    assert migrate(engine, repo, owner=OWNER) == []
