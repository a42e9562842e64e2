"""What a hook call costs besides its answer: the processes it starts and the modules it
imports. A hook is a fresh process per event (the client waits for it), so a ``git`` process or
a heavy import on every call is latency the user pays on every prompt."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import Backend
from hook_support import claude_payload, hook_env, run_hook


def _git_spy(folder: Path) -> tuple[Path, str]:
    """A ``git`` on PATH that appends its arguments to a log and runs the real git: returns
    the log and the PATH to use."""
    real = shutil.which("git")
    assert real is not None
    folder.mkdir()
    log = folder / "calls.log"
    spy = folder / "git"
    spy.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n', encoding="utf-8")
    spy.chmod(0o755)
    return log, f"{folder}:/usr/bin:/bin"


def _calls(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_a_hook_runs_git_once_per_head_and_never_for_nothing_to_do(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """In a repository without a remote the project is its root commit: the first prompt
    asks git (``git rev-list``) and caches the answer under the home, the next prompts run no
    git process; a ``SessionStart`` with nothing to print and a ``PreCompact`` reset need no
    project at all; a new root (another history checked out) is asked once more."""
    repo = tmp_path / "shop"
    repo.mkdir()
    author = ["-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), *author, "commit", "-q", "--allow-empty", "-m", "a"],
                   check=True)  # fmt: skip
    engine = sqlite_backend.engine()
    root = subprocess.run(["git", "-C", str(repo), "rev-list", "--max-parents=0", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    engine.add("The shop's invoices are stored in PostgreSQL", owner="alice",
               project=f"commit:{root}")  # fmt: skip
    log, path = _git_spy(tmp_path / "bin")
    env = {**hook_env(sqlite_backend), "PATH": path}
    start = claude_payload("SessionStart", "s1", repo, source="startup")
    assert run_hook(env, "SessionStart", start).stdout == ""
    assert run_hook(env, "PreCompact", claude_payload("PreCompact", "s1", repo)).stdout == ""
    assert _calls(log) == []  # nothing to print, a reset: no project needed, no git run
    ask = claude_payload("UserPromptSubmit", "s1", repo, prompt="where are invoices stored?")
    assert "PostgreSQL" in (run_hook(env, "UserPromptSubmit", ask).context() or "")
    assert [c for c in _calls(log) if "rev-list" in c] == [
        f"-C {repo.resolve()} rev-list --max-parents=0 HEAD"
    ]
    again = claude_payload("UserPromptSubmit", "s2", repo, prompt="where are invoices stored?")
    assert "PostgreSQL" in (run_hook(env, "UserPromptSubmit", again).context() or "")
    assert len(_calls(log)) == 1  # the cache answered: no git process
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--orphan", "other"], check=True)
    subprocess.run(["git", "-C", str(repo), *author, "commit", "-q", "--allow-empty", "-m", "b"],
                   check=True)  # fmt: skip
    other = claude_payload("UserPromptSubmit", "s3", repo, prompt="where are invoices stored?")
    assert run_hook(env, "UserPromptSubmit", other).context() is None  # another project now
    assert len(_calls(log)) == 2
