"""Codex CLI's hook trust, recorded the way Codex records it.

Codex (checked with ``@openai/codex`` 0.171.0) runs a hook of ``~/.codex/hooks.json`` or
``<repo>/.codex/hooks.json`` only once someone trusted its exact definition: it keeps
``[hooks.state."<hooks.json path>:<event>:<group>:<handler>"] trusted_hash = "sha256:..."`` in
``~/.codex/config.toml`` and skips (with a warning pointing at ``/hooks``) a hook whose current
hash is not the trusted one, so every change of memlane's entries needs trusting again.

:func:`trust` does what Codex's own ``/hooks`` screen does, through Codex's app server (``codex
app-server``, JSON-RPC over stdio): ``hooks/list`` gives each hook's ``key`` and
``currentHash``; ``config/batchWrite`` upserts ``hooks.state`` with those hashes. memlane never
computes Codex's hash itself (it is Codex's to define), and trusts only its own entries (a
command running ``memlane ... hook``) of the file it just wrote.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

#: How long the app server may take to start and answer (seconds).
APP_SERVER_TIMEOUT_S = 60.0
#: What a user runs when the trust cannot be recorded here.
MANUAL = "start `codex` in this folder, type /hooks and trust memlane's hooks"


class TrustError(Exception):
    """The trust could not be recorded (the message says why and what to run instead)."""


def _rpc(codex: str, cwd: Path, requests: list[dict[str, Any]]) -> dict[int, Any]:
    """Send ``requests`` (JSON-RPC, each with an ``id``) to ``codex app-server`` after the
    handshake, one at a time; returns ``{id: result}``. Raises :class:`TrustError`."""
    try:
        proc = subprocess.Popen(
            [codex, "app-server"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
    except OSError as exc:
        raise TrustError(f"cannot start {codex} app-server: {exc}") from None
    assert proc.stdin is not None and proc.stdout is not None
    results: dict[int, Any] = {}
    try:
        handshake: dict[str, Any] = {
            "id": 0, "method": "initialize",
            "params": {"clientInfo": {"name": "memlane", "version": "1"}},
        }  # fmt: skip
        sent: list[dict[str, Any]] = [handshake, {"method": "initialized"}, *requests]
        for request in sent:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **request}) + "\n")
            proc.stdin.flush()
            if "id" not in request:
                continue
            for line in proc.stdout:
                answer = json.loads(line) if line.startswith("{") else {}
                if answer.get("id") != request["id"]:
                    continue
                if "error" in answer:
                    raise TrustError(f"codex app-server {request['method']}: {answer['error']}")
                results[int(request["id"])] = answer.get("result")
                break
            else:
                raise TrustError(f"codex app-server exited before answering {request['method']}")
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=APP_SERVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return results


def trust(hooks_file: Path, cwd: Path, codex: str | None = None) -> list[str]:
    """Trust memlane's hooks of ``hooks_file`` (a Codex ``hooks.json``) as Codex's ``/hooks``
    does, asking ``codex app-server`` (``codex``: the executable, default ``codex`` on PATH)
    run in ``cwd``. Returns the keys trusted now (``[]``: all already trusted).

    Raises:
        TrustError: Codex is not on PATH, or its app server failed (then the user runs
            :data:`MANUAL`).
    """
    from memlane.hooks.install import is_memlane

    found = codex or shutil.which("codex")
    if found is None:
        raise TrustError("codex is not on PATH")
    listing = _rpc(found, cwd, [{"id": 1, "method": "hooks/list",
                                 "params": {"cwds": [str(cwd)]}}])[1]  # fmt: skip
    wanted: dict[str, dict[str, str]] = {}
    seen = 0
    source = str(hooks_file.resolve())
    for entry in (listing or {}).get("data", []):
        for hook in entry.get("hooks", []):
            path = str(Path(str(hook.get("sourcePath") or "")).resolve())
            if path != source or not is_memlane({"command": hook.get("command")}):
                continue
            seen += 1
            if hook.get("trustStatus") != "trusted":
                wanted[str(hook["key"])] = {"trusted_hash": str(hook["currentHash"])}
    if not seen:
        raise TrustError(
            f"codex does not list memlane's hooks of {hooks_file} (a project's .codex/ loads "
            "only once the project is trusted: start codex there and trust it)"
        )
    if not wanted:
        return []
    edit = {"keyPath": "hooks.state", "value": wanted, "mergeStrategy": "upsert"}
    _rpc(found, cwd, [{"id": 1, "method": "config/batchWrite", "params": {"edits": [edit]}}])
    return sorted(wanted)
