"""The event adapters and install shapes of Codex CLI, Qwen Code, Copilot CLI and OpenCode, without
the clients (the real ones: ``tests/test_clients_<client>.py``): what ``memlane hooks install
--client ...`` writes, and what a hook call of each client's payload shape prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import Backend
from hook_support import hook_env, run_hook
from memlane.cli import app

CMD = "/opt/bin/memlane"


def install(home: Path, client: str, *extra: str) -> Any:
    return CliRunner().invoke(
        app,
        ["hooks", "install", "--client", client, "--scope", "user", "--command", CMD, *extra],
        env={"HOME": str(home), "PATH": "/nonexistent"},
    )


def test_codex_install_writes_hooks_json_and_says_how_to_trust_without_codex(
    tmp_path: Path,
) -> None:
    """No ``codex`` on PATH: the hooks are written and the installer says Codex skips them
    until trusted, and the one thing to do."""
    done = install(tmp_path, "codex")
    assert done.exit_code == 0, done.output
    hooks = json.loads((tmp_path / ".codex" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"UserPromptSubmit", "SessionStart", "PostCompact"}
    (group,) = hooks["UserPromptSubmit"]
    assert group["hooks"] == [
        {"type": "command", "command": f"{CMD} hook UserPromptSubmit --client codex",
         "timeout": 10}
    ]  # fmt: skip
    assert "Codex skips hooks nobody trusted" in done.output and "/hooks" in done.output


def test_copilot_install_is_a_version_1_file_of_flat_hooks_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / ".copilot" / "hooks" / "memlane.json"
    assert install(tmp_path, "copilot").exit_code == 0
    data = json.loads(path.read_text())
    assert data["version"] == 1
    assert data["hooks"]["userPromptSubmitted"] == [
        {"type": "command", "bash": f"{CMD} hook userPromptSubmitted --client copilot",
         "timeoutSec": 10}
    ]  # fmt: skip
    before = path.read_text()
    again = install(tmp_path, "copilot")
    assert "nothing to change" in again.output and path.read_text() == before
    removed = CliRunner().invoke(
        app, ["hooks", "uninstall", "--client", "copilot", "--scope", "user"],
        env={"HOME": str(tmp_path)},
    )  # fmt: skip
    assert removed.exit_code == 0 and "hooks" not in json.loads(path.read_text())


def test_qwen_install_uses_its_settings_file(tmp_path: Path) -> None:
    assert install(tmp_path, "qwen").exit_code == 0
    hooks = json.loads((tmp_path / ".qwen" / "settings.json").read_text())["hooks"]
    assert set(hooks) == {"UserPromptSubmit", "SessionStart", "PostCompact"}


def test_copilot_payload_camel_case_and_its_top_level_additional_context(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """Copilot CLI sends ``sessionId`` and reads a top-level ``additionalContext`` (a
    ``hookSpecificOutput`` is ignored there). Before: "the payload has no session_id"."""
    env = hook_env(sqlite_backend)
    engine = sqlite_backend.engine()
    engine.add("The staging database is PostgreSQL 16", owner="alice")
    payload = {"sessionId": "s-1", "timestamp": 1, "cwd": str(tmp_path),
               "prompt": "Which database does staging use?"}  # fmt: skip
    done = run_hook(env, "userPromptSubmitted", payload, "--client", "copilot")
    assert done.returncode == 0
    printed = json.loads(done.stdout)
    assert set(printed) == {"additionalContext"}
    assert "PostgreSQL 16" in printed["additionalContext"]
    again = run_hook(env, "userPromptSubmitted", {**payload, "prompt": "and the port?"},
                     "--client", "copilot")  # fmt: skip
    assert again.stdout == ""  # the same session: not injected twice


@pytest.mark.parametrize("client", ["codex", "qwen"])
def test_claude_shaped_clients_print_hook_specific_output(
    sqlite_backend: Backend, tmp_path: Path, client: str
) -> None:
    env = hook_env(sqlite_backend)
    sqlite_backend.engine().add("The staging database is PostgreSQL 16", owner="alice")
    payload = {"session_id": f"s-{client}", "cwd": str(tmp_path), "hook_event_name":
               "UserPromptSubmit", "prompt": "Which database does staging use?"}  # fmt: skip
    done = run_hook(env, "UserPromptSubmit", payload, "--client", client)
    assert "PostgreSQL 16" in str(done.context())


def test_qwen_continuation_of_a_turn_is_a_repeat_of_the_turn(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """Qwen Code fires ``UserPromptSubmit`` again inside one turn (after a tool's result) with
    the turn's ``prompt_id`` and model-bound text as ``prompt``: the turn model answers it as a
    repeat, and the hook prints nothing (the turn's block is already in the history) - no
    second copy, no search on the tool's output, and nothing recorded that would take the
    turn's memory out of the window. The next prompt_id is a new turn."""
    env = hook_env(sqlite_backend)
    engine = sqlite_backend.engine()
    engine.add("The staging database is PostgreSQL 16", owner="alice")
    engine.add("The CI runners use Ubuntu 24.04 images", owner="alice")
    base = {"session_id": "q-1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit"}
    first = run_hook(env, "UserPromptSubmit", {**base, "prompt_id": "q-1########0",
                     "prompt": "Which database does staging use?",
                     "submitted_prompt": "Which database does staging use?"},
                     "--client", "qwen")  # fmt: skip
    assert "PostgreSQL 16" in str(first.context())
    continuation = {**base, "prompt_id": "q-1########0",
                    "prompt": "Tool output: the CI runners use Ubuntu 24.04 images"}  # fmt: skip
    again = run_hook(env, "UserPromptSubmit", continuation, "--client", "qwen")
    assert again.returncode == 0 and again.stdout == ""
    nxt = run_hook(env, "UserPromptSubmit", {**base, "prompt_id": "q-1########1",
                   "prompt": "Which image do the CI runners use?",
                   "submitted_prompt": "Which image do the CI runners use?"},
                   "--client", "qwen")  # fmt: skip
    assert "Ubuntu 24.04" in str(nxt.context()) and "PostgreSQL 16" not in str(nxt.context())


def test_opencode_remembered_outputs_leave_those_memories_out(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """OpenCode's plugin sends the outputs of the session's memlane ``remember`` calls under
    ``memlane_remembered``: those memories are left out of the block (the model holds them);
    an output that is not ``remember``'s JSON is skipped, not an error."""
    env = hook_env(sqlite_backend)
    engine = sqlite_backend.engine()
    engine.add("The staging database is PostgreSQL 16", owner="alice")
    written = engine.add("The CI runners use Ubuntu 24.04 images", owner="alice")
    output = json.dumps(written.to_dict(), indent=2)  # what memlane mcp's remember answers
    payload = {"session_id": "o-1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "Which image do the CI runners use, and which database?",
               "memlane_remembered": ["not json", {"odd": 1}, output]}  # fmt: skip
    done = run_hook(env, "UserPromptSubmit", payload, "--client", "opencode")
    said = str(done.context())
    assert "PostgreSQL 16" in said and "Ubuntu 24.04" not in said, done.stderr
    other = run_hook(env, "UserPromptSubmit", {**payload, "session_id": "o-2",
                     "memlane_remembered": []}, "--client", "opencode")  # fmt: skip
    assert "Ubuntu 24.04" in str(other.context())


def _prompt(client: str, session: str, cwd: Path, text: str, n: int) -> tuple[str, dict[str, Any]]:
    """``(event, payload)`` of one typed prompt as ``client`` sends it (``n``: its index)."""
    if client == "copilot":
        return "userPromptSubmitted", {"sessionId": session, "timestamp": n, "cwd": str(cwd),
                                       "prompt": text}  # fmt: skip
    event = "BeforeAgent" if client == "gemini" else "UserPromptSubmit"
    payload = {"session_id": session, "cwd": str(cwd), "hook_event_name": event, "prompt": text}
    if client == "opencode":
        payload["message_id"] = f"msg_{n:04d}"
    return event, payload


def _context(stdout: str) -> str:
    """The block a hook printed, from either output shape ("" when nothing)."""
    if not stdout:
        return ""
    printed = json.loads(stdout)
    return str(
        printed.get("additionalContext") or printed["hookSpecificOutput"]["additionalContext"]
    )


@pytest.mark.parametrize("client", ["claude-code", "gemini", "copilot", "opencode"])
def test_a_kept_block_is_never_injected_again_past_the_window(
    sqlite_backend: Backend, tmp_path: Path, client: str
) -> None:
    """Every client's prompt is one turn of the turn model with ``kept=True``: its client keeps
    the block in its history, so past the no-repeat window (depth 2 here; 10 by default, when
    Copilot CLI and OpenCode held the memory twice at the 11th prompt) it is not injected
    again; after a compaction it comes back once. OpenCode's plugin sends the message id: the
    same message seen twice is one turn (printed once). Fails before (these four clients
    called inject): the 3rd prompt printed the database memory again."""
    env = {**hook_env(sqlite_backend), "MEMLANE_INJECTION__CONTEXT_WINDOW_DEPTH": "2"}
    engine = sqlite_backend.engine()
    engine.add("The staging database is PostgreSQL 16", owner="alice")
    engine.close()
    asks = ["Which database does staging use?", "What is the weather like on Mars today?",
            "Which database version does staging run?", "Is the staging database PostgreSQL?"]  # fmt: skip
    blocks = []
    for n, ask in enumerate(asks):
        event, payload = _prompt(client, f"k-{client}", tmp_path, ask, n)
        done = run_hook(env, event, payload, "--client", client)
        assert done.returncode == 0, done.stderr
        blocks.append(_context(done.stdout))
        if client == "opencode" and n == 0:  # the plugin's call again for the same message
            twice = run_hook(env, event, payload, "--client", client)
            assert twice.returncode == 0 and twice.stdout == ""
    assert "PostgreSQL 16" in blocks[0]
    assert [b for b in blocks[1:] if "PostgreSQL 16" in b] == []
    compact = "preCompact" if client == "copilot" else "PreCompact"
    if client == "gemini":  # Gemini CLI: /clear (its compression is followed by BeforeModel)
        reset = {"session_id": f"k-{client}", "cwd": str(tmp_path), "source": "clear"}
        assert run_hook(env, "SessionStart", reset, "--client", client).returncode == 0
    else:
        key = "sessionId" if client == "copilot" else "session_id"
        reset = {key: f"k-{client}", "cwd": str(tmp_path)}
        assert run_hook(env, compact, reset, "--client", client).returncode == 0
    event, payload = _prompt(client, f"k-{client}", tmp_path, asks[0], 9)
    assert "PostgreSQL 16" in _context(run_hook(env, event, payload, "--client", client).stdout)
