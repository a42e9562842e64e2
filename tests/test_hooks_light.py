"""What a hook call costs besides its answer: the processes it starts and the modules it
imports. A hook is a fresh process per event (the client waits for it), so a ``git`` process or
a heavy import on every call is latency the user pays on every prompt."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from conftest import Backend
from hook_support import claude_payload, hook_env, run_hook
from memlane.hooks.backend import quote_segment, split_url
from server_support import run_server

#: Modules a hook call with a server (or with nothing to do) must not import: the heavy ones
#: (~0.1-1 s each: the CLI, the engine and its libraries), and the standard library modules
#: that cost milliseconds of import on every call while the hook can do without them.
NOT_ON_THE_LIGHT_PATH = (
    "typer", "click", "rich", "pydantic", "numpy", "onnxruntime", "tokenizers", "fastapi",
    "httpx", "uvicorn", "torch", "memlane.engine", "memlane.cli", "memlane.config",
    "memlane.store", "pathlib", "tomllib", "subprocess", "urllib", "typing", "datetime",
    "secrets", "hashlib", "ssl", "email", "http", "dataclasses", "inspect", "logging",
    "encodings.idna", "runpy",
    # json imports re, and re enum, functools and collections; socket imports selectors and
    # enum; threading functools: together about half the hook's own CPU time (memlane's
    # _fastjson, _socket and _thread do the work with the same C modules)
    "json", "re", "enum", "functools", "collections", "operator", "socket", "selectors",
    "threading",
)  # fmt: skip
#: The hook process: the entry point of the ``memlane`` script, its module list on stderr
#: at the end (``os._exit``, which the hook ends with, is made a ``sys.exit`` so that the
#: script goes on).
MODULES_SCRIPT = (
    "import sys, os\n"
    "os._exit = sys.exit\n"
    "sys.argv = ['memlane', 'hook', sys.argv[1]]\n"
    "from memlane._entry import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print(repr(sorted(sys.modules)), file=sys.stderr)\n"  # repr: json would be imported
)
#: What the interpreter alone loads (``site``, a ``sitecustomize`` or ``.pth`` file of this
#: environment): not the hook's doing, so not held against it.
STARTUP_SCRIPT = "import sys\nprint(repr(sorted(sys.modules)), file=sys.stderr)\n"


def _modules(env: dict[str, str], event: str, payload: dict[str, Any]) -> tuple[str, list[str]]:
    """``(stdout, modules imported)`` of one hook call through the script's entry point."""
    done = subprocess.run(
        [sys.executable, "-c", MODULES_SCRIPT, event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=120,
    )
    modules = ast.literal_eval(done.stderr.decode().strip().splitlines()[-1])
    return done.stdout.decode(), modules


def _at_startup(env: dict[str, str]) -> set[str]:
    """The modules a bare interpreter of this environment has loaded (``site``, ...)."""
    done = subprocess.run(
        [sys.executable, "-c", STARTUP_SCRIPT], capture_output=True, env=env, timeout=60
    )
    return set(ast.literal_eval(done.stderr.decode().strip().splitlines()[-1]))


def _heavy(modules: list[str], startup: set[str]) -> list[str]:
    """The modules of the list above among ``modules``, beyond those loaded at ``startup``."""
    prefixes = tuple(f"{name}." for name in NOT_ON_THE_LIGHT_PATH)
    return [m for m in modules if m not in startup and (
        m in NOT_ON_THE_LIGHT_PATH or m.startswith(prefixes))]  # fmt: skip


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


def test_the_light_paths_import_only_what_they_need(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """A prompt with ``memlane serve`` up, and a ``SessionStart`` with nothing to print,
    import none of the heavy modules nor the standard library modules the hook does without
    (the list above, beyond what the bare interpreter of this environment loads): the C
    modules _json and _socket and memlane's hook modules are the path. The ``SessionStart``
    opens no connection at all. A home without ``memlane.toml``: with one, :mod:`tomllib`
    reads it."""
    engine = sqlite_backend.engine()
    engine.add("The staging database is PostgreSQL 16", owner="alice")
    assert not (sqlite_backend.home / "memlane.toml").exists()
    with run_server(sqlite_backend) as served:
        env = {k: v for k, v in hook_env(sqlite_backend).items() if k != "MEMLANE_HOOKS__URL"}
        ask = claude_payload("UserPromptSubmit", "l1", tmp_path, prompt="staging database?")
        startup = _at_startup(env)
        out, modules = _modules(env, "UserPromptSubmit", ask)
        assert "PostgreSQL 16" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert _heavy(modules, startup) == []
        assert {"_json", "_socket", "memlane.hooks.backend"} <= set(modules)
        start = claude_payload("SessionStart", "l1", tmp_path, source="startup")
        out, modules = _modules(env, "SessionStart", start)
        assert out == ""
        assert _heavy(modules, startup) == []
        assert [m for m in modules if m in {"_socket", "memlane.hooks.backend"}] == []
        # a prompt inside a repository with a remote: the project is read from .git/config
        repo = tmp_path / "repo"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "remote", "add", "origin",
                        "git@github.com:acme/shop.git"], check=True)  # fmt: skip
        ask = claude_payload("UserPromptSubmit", "l2", repo, prompt="staging database?")
        out, modules = _modules(env, "UserPromptSubmit", ask)
        assert "PostgreSQL 16" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "memlane.scope" in modules
        assert _heavy(modules, startup) == []
        assert "POST /v1/turn" in served.log.read_text()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765",
        "http://127.0.0.1:8765/",
        "https://Memory.Example.com/prefix/v2/",
        "http://[::1]:9000",
        "http://localhost",
        "http://user:secret@host.example:81/p",  # not the plain shape: urlsplit answers
        "http://h\u00f6st.example:82",
    ],
)
def test_the_hooks_url_reader_agrees_with_urlsplit(url: str) -> None:
    parts = urlsplit(url)
    assert split_url(url) == (parts.scheme, parts.hostname, parts.port, parts.netloc, parts.path)


@pytest.mark.parametrize("session", ["0b6f3c2e-9d1a-4c55", "a b/c?d", "caf\u00e9", "x%41", "~._-"])
def test_session_ids_are_quoted_as_urllib_quotes_them(session: str) -> None:
    assert quote_segment(session) == quote(session, safe="")


def _owner_and_toml_import(home: Path) -> tuple[str, bool]:
    """``[hooks] owner`` as a fresh process's hook reads it, and whether it imported tomllib."""
    code = (
        "import sys\n"
        "from memlane.hooks.config import load_config\n"
        f"cfg = load_config({str(home)!r})\n"
        "print(cfg.owner, 'tomllib' in sys.modules, sep='|')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    owner, imported = done.stdout.strip().split("|")
    return owner, imported == "True"


def test_memlane_toml_is_parsed_again_only_when_it_changed(tmp_path: Path) -> None:
    """The hook keeps the sections it reads of ``memlane.toml`` in ``<home>/cache`` (its
    user's only): a file unchanged since (and older than 2 s at) that read is not parsed
    again; an edit is seen at once, even one that keeps the size and the modification time,
    and a file replaced by another."""
    home = tmp_path / "home"
    home.mkdir()
    toml = home / "memlane.toml"
    toml.write_text('[hooks]\nowner = "carol"\n[server]\ntoken = "s3cret"\n', encoding="utf-8")
    past = time.time() - 60
    os.utime(toml, (past, past))
    assert _owner_and_toml_import(home) == ("carol", True)  # read and cached
    cache = home / "cache" / "hooks-toml.json"
    assert cache.stat().st_mode & 0o777 == 0o600  # the token is in it
    assert _owner_and_toml_import(home) == ("carol", False)  # from the cache
    toml.write_text('[hooks]\nowner = "erinx"\n[server]\ntoken = "s3cret"\n', encoding="utf-8")
    os.utime(toml, (past, past))  # same size, same modification time: the change time moved
    assert _owner_and_toml_import(home) == ("erinx", True)
    assert _owner_and_toml_import(home) == ("erinx", False)
    fresh = home / "new.toml"
    fresh.write_text('[hooks]\nowner = "frank"\n', encoding="utf-8")
    os.utime(fresh, (past, past))
    fresh.replace(toml)  # another file (inode) under the name
    assert _owner_and_toml_import(home) == ("frank", True)
    toml.write_text('[hooks]\nowner = "gina"\n', encoding="utf-8")  # just written: racy
    assert _owner_and_toml_import(home) == ("gina", True)
    assert _owner_and_toml_import(home) == ("gina", True)  # still within 2 s of the read
    toml.unlink()
    assert _owner_and_toml_import(home) == ("", False)  # no file: the defaults
