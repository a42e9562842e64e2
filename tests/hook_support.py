"""Shared helpers of the hook tests: run ``memlane hook`` as the clients do (a fresh process,
the payload on stdin) and build payloads shaped like theirs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import Backend
from server_support import run_server

OWNER = "alice"


@dataclass
class HookRun:
    returncode: int
    stdout: str
    stderr: str

    def context(self) -> str | None:
        """The ``additionalContext`` printed (``None`` when nothing was printed)."""
        if not self.stdout:
            return None
        return str(json.loads(self.stdout)["hookSpecificOutput"]["additionalContext"])


#: ``[hooks] timeout_s`` of the tests (the default is 8 s): what they check is what the hook
#: does, not how fast a loaded machine runs it, so the deadline is out of their way. The tests
#: of the deadline itself set their own (a stuck stdin, a server that never answers).
TEST_TIMEOUT_S = "300"


def hook_env(backend: Backend, **hooks: Any) -> dict[str, str]:
    """The hash-embedder environment of ``backend`` with ``[hooks]`` overrides (owner alice;
    no server unless ``url`` is given: a closed port, so the engine runs in-process; the
    deadline :data:`TEST_TIMEOUT_S` unless ``timeout_s`` is given)."""
    env = backend.child_env()
    settings = {"owner": OWNER, "url": "http://127.0.0.1:9", "timeout_s": TEST_TIMEOUT_S, **hooks}
    for key, value in settings.items():
        env[f"MEMLANE_HOOKS__{key.upper()}"] = str(value)
    return env


#: The two ways a hook reaches the store (:func:`hook_paths`).
PATHS = ("in-process", "server")


@contextmanager
def hook_paths(path: str, backend: Backend) -> Iterator[dict[str, str]]:
    """The hook's environment for ``path`` (one of :data:`PATHS`): no server (the engine
    in-process), or a real ``memlane serve`` of ``backend``'s store, stopped on exit."""
    if path == "in-process":
        yield hook_env(backend)
        return
    with run_server(backend) as served:
        assert served.proc.poll() is None, served.log.read_text()
        yield hook_env(backend, url=served.url)


def run_hook(env: dict[str, str], event: str, payload: dict[str, Any] | str, *args: str) -> HookRun:
    """``python -m memlane hook EVENT ARGS`` with ``payload`` (a dict as JSON, a str as is)."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    done = subprocess.run(
        [sys.executable, "-m", "memlane", "hook", event, *args],
        input=data.encode("utf-8"),
        capture_output=True,
        env=env,
        timeout=120,
    )
    return HookRun(done.returncode, done.stdout.decode(), done.stderr.decode())


def claude_payload(event: str, session: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook payload: the common fields, then the event's own."""
    return {
        "session_id": session,
        "transcript_path": str(cwd / f"{session}.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": event,
        "permission_mode": "default",  # a field memlane does not know
        **fields,
    }


def gemini_payload(event: str, session: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    """A Gemini CLI hook payload (with its ``timestamp``)."""
    return {
        "session_id": session,
        "transcript_path": str(cwd / f"{session}.json"),
        "cwd": str(cwd),
        "hook_event_name": event,
        "timestamp": "2026-11-23T17:00:00.000Z",
        **fields,
    }
