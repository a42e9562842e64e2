"""``memlane hooks install|uninstall|plugin`` on fixture settings files: missing, empty, with
other tools' hooks, malformed. Idempotent, other entries kept, a backup first, malformed files
untouched, ``--dry-run`` writes nothing; the checked-in plugin is the generated one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlane import __version__
from memlane.cli import app
from memlane.config import Settings
from memlane.hooks.install import is_memlane, plugin_files

REPO = Path(__file__).resolve().parents[1]
CMD = "/opt/bin/memlane"

OTHER_TOOL: dict[str, Any] = {
    "model": "opus",
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "~/bin/branch-context.sh", "timeout": 5}]}
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    },
}


def cli(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    return result


def install(project: Path, *extra: str, client: str = "claude-code") -> Any:
    return cli(
        "hooks", "install", "--client", client, "--scope", "project",
        "--project-dir", str(project), "--command", CMD, *extra,
    )  # fmt: skip


def commands(data: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in data["hooks"].get(event, []) for h in g["hooks"]]


@pytest.mark.parametrize("start", ["missing", "empty", "other-tool"])
def test_install_merges_idempotently_and_uninstall_restores(tmp_path: Path, start: str) -> None:
    path = tmp_path / ".claude" / "settings.json"
    if start != "missing":
        path.parent.mkdir()
        path.write_text("" if start == "empty" else json.dumps(OTHER_TOOL, indent=2))
    before = path.read_text() if path.exists() else None

    first = install(tmp_path)
    assert first.exit_code == 0, first.output
    data = json.loads(path.read_text())
    assert commands(data, "UserPromptSubmit")[-1] == f"{CMD} hook UserPromptSubmit"
    assert data["hooks"]["SessionStart"] == [
        {
            "matcher": "startup|clear|compact",
            "hooks": [{"type": "command", "command": f"{CMD} hook SessionStart", "timeout": 10}],
        }
    ]
    assert commands(data, "PreCompact") == [f"{CMD} hook PreCompact"]
    if start == "other-tool":
        assert commands(data, "UserPromptSubmit")[0] == "~/bin/branch-context.sh"
        assert data["hooks"]["PreToolUse"] == OTHER_TOOL["hooks"]["PreToolUse"]
        assert data["model"] == "opus"
        backup = path.with_name("settings.json.memlane-backup")
        assert backup.read_text() == before
    installed = path.read_text()

    second = install(tmp_path)  # running it twice changes nothing
    assert second.exit_code == 0 and "nothing to change" in second.output
    assert path.read_text() == installed

    removed = cli("hooks", "uninstall", "--scope", "project", "--project-dir", str(tmp_path))
    assert removed.exit_code == 0, removed.output
    after = json.loads(path.read_text())
    if start == "other-tool":
        assert after == OTHER_TOOL
    else:
        assert after == {}
    assert not any(
        is_memlane(h) for e in after.get("hooks", {}).values() for g in e for h in g["hooks"]
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"hooks": {"UserPromptSubmit": [',
        "[1, 2]",
        '{"hooks": []}',
        '{"hooks": {"SessionStart": {}}}',
    ],
    ids=["truncated", "array", "hooks-list", "event-object"],
)
def test_malformed_settings_are_a_clear_error_and_stay_untouched(tmp_path: Path, text: str) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(text)
    result = install(tmp_path)
    assert result.exit_code == 3, result.output
    assert str(path) in " ".join(result.output.split()) and "not changed" in result.output
    assert path.read_text() == text
    assert not path.with_name("settings.json.memlane-backup").exists()


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text(json.dumps(OTHER_TOOL, indent=2))
    result = cli(
        "hooks", "install", "--scope", "local", "--project-dir", str(tmp_path),
        "--command", CMD, "--dry-run",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"+++ {path}" in result.output
    assert f'+            "command": "{CMD} hook PreCompact",' in result.output
    assert path.read_text() == json.dumps(OTHER_TOOL, indent=2)


def test_user_scope_writes_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    result = cli("hooks", "install", "--command", CMD)
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert commands(data, "UserPromptSubmit") == [f"{CMD} hook UserPromptSubmit"]


def test_gemini_install_follows_the_model_requests(tmp_path: Path, _isolated_env: Path) -> None:
    result = install(tmp_path, client="gemini")
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert data["hooks"]["BeforeAgent"] == [
        {
            "hooks": [
                {
                    "name": "memlane-BeforeAgent",
                    "type": "command",
                    "command": f"{CMD} hook BeforeAgent --client gemini",
                    "timeout": 10000,
                }
            ]
        }
    ]
    assert data["hooks"]["SessionStart"][0]["matcher"] == "clear"
    # BeforeModel sees each request: the tracking follows compressions and /clear
    (before_model,) = data["hooks"]["BeforeModel"][0]["hooks"]
    assert before_model["command"] == f"{CMD} hook BeforeModel --client gemini"
    # PreCompress fires every turn in 0.61 (compression or not): not installed
    assert "PreCompress" not in data["hooks"]
    # Gemini's context persists like Claude Code's: the same window, nothing overridden
    assert Settings.load().injection_for("gemini").context_window_depth == 10
    local = cli("hooks", "install", "--client", "gemini", "--scope", "local")
    assert local.exit_code == 3 and "no local settings file" in local.output


def test_checked_in_plugin_is_the_generated_one(tmp_path: Path) -> None:
    result = cli("hooks", "plugin", str(tmp_path / "plugin"))
    assert result.exit_code == 0, result.output
    generated = plugin_files(__version__)
    for rel, text in generated.items():
        assert (tmp_path / "plugin" / rel).read_text() == text
        assert (REPO / "integrations" / "claude-code" / rel).read_text() == text, (
            f"integrations/claude-code/{rel} is stale: run `memlane hooks plugin "
            "integrations/claude-code`"
        )
    manifest = json.loads(generated[".claude-plugin/plugin.json"])
    assert (manifest["name"], manifest["version"]) == ("memlane", __version__)
    assert json.loads(generated[".mcp.json"]) == {
        "mcpServers": {"memlane": {"command": "memlane", "args": ["mcp"]}}
    }
    hooks = json.loads(generated["hooks/hooks.json"])["hooks"]
    assert commands({"hooks": hooks}, "UserPromptSubmit") == ["memlane hook UserPromptSubmit"]


def test_mcp_install_registers_memlane_in_mcp_json(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    other = {"mcpServers": {"github": {"command": "gh-mcp", "args": []}}}
    path.write_text(json.dumps(other))
    args = ("mcp", "install", "--project-dir", str(tmp_path), "--command", CMD)
    first = cli(*args)
    assert first.exit_code == 0, first.output
    assert json.loads(path.read_text()) == {
        "mcpServers": {**other["mcpServers"], "memlane": {"command": CMD, "args": ["mcp"]}}
    }
    assert json.loads(path.with_name(".mcp.json.memlane-backup").read_text()) == other
    text = path.read_text()
    assert "nothing to change" in cli(*args).output and path.read_text() == text
    path.write_text("{not json")
    bad = cli(*args)
    assert bad.exit_code == 3 and "not valid JSON" in bad.output
    assert path.read_text() == "{not json"


@pytest.mark.parametrize("client", ["claude-code", "gemini"])
def test_home_goes_into_every_hook_command(tmp_path: Path, client: str) -> None:
    home = tmp_path / "my home"
    folder = ".claude" if client == "claude-code" else ".gemini"
    result = cli(
        "hooks", "install", "--client", client, "--scope", "user", "--command", CMD,
        "--home", str(home),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((Path.home() / folder / "settings.json").read_text())
    every = [c for event in data["hooks"] for c in commands(data, event)]
    assert every and all(c.endswith(f" --home '{home.resolve()}'") for c in every), every


def test_project_scope_holds_no_personal_path(tmp_path: Path) -> None:
    result = cli("hooks", "install", "--scope", "project", "--project-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert commands(data, "UserPromptSubmit") == ["memlane hook UserPromptSubmit"]
    refused = cli(
        "hooks", "install", "--scope", "project", "--project-dir", str(tmp_path),
        "--home", str(tmp_path / "h"),
    )  # fmt: skip
    assert refused.exit_code != 0 and "--scope local" in refused.output


def test_mode_and_first_backup_are_kept(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = json.dumps(OTHER_TOOL, indent=2)
    path.write_text(original)
    path.chmod(0o640)
    assert install(tmp_path).exit_code == 0
    assert (path.stat().st_mode & 0o777) == 0o640
    backup = path.with_name("settings.json.memlane-backup")
    assert backup.read_text() == original
    assert install(tmp_path, "--command", "/elsewhere/memlane").exit_code == 0
    assert backup.read_text() == original  # the file before memlane, not the last install
    assert (path.stat().st_mode & 0o777) == 0o640
