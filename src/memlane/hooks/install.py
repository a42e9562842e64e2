"""memlane's entries in the clients' settings files, and the Claude Code plugin.

:func:`plan` computes the new settings text (memlane's hook entries merged into the file's
``hooks``: other tools' entries and every other key kept, memlane's own entries replaced, so a
second install changes nothing); :func:`apply` writes it (a backup of the old file first, then a
temporary file renamed over it). A file that is not a JSON object, or whose ``hooks`` are not
shaped as the client expects, raises :class:`~memlane.errors.InvalidArgument` and is left as it
was. :func:`plugin_files` is the Claude Code plugin (``memlane hooks plugin DIR``).

Shapes (INTEGRATIONS.md, checked against the clients' docs):

- Claude Code: ``{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command":
  "...", "timeout": 10}]}], "SessionStart": [{"matcher": "startup|clear|compact", "hooks": [...]}]}}``,
  timeouts in seconds; files ``~/.claude/settings.json`` (user), ``.claude/settings.json``
  (project), ``.claude/settings.local.json`` (local).
- Gemini CLI (geminicli.com/docs/hooks/reference): the same nesting, ``timeout`` in
  milliseconds, a ``name``; files ``~/.gemini/settings.json`` (user), ``.gemini/settings.json``
  (project).
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.errors import InvalidArgument

CLIENTS = ("claude-code", "gemini", "codex", "qwen", "copilot", "opencode")
#: Where each client keeps its settings: (user folder under ~, project folder, file name).
FOLDERS = {
    "claude-code": (".claude", ".claude", "settings.json"),
    "gemini": (".gemini", ".gemini", "settings.json"),
    "codex": (".codex", ".codex", "hooks.json"),
    "qwen": (".qwen", ".qwen", "settings.json"),
    "copilot": (".copilot/hooks", ".github/hooks", "memlane.json"),
    "opencode": (".config/opencode/plugins", ".opencode/plugins", "memlane.js"),
}
SCOPES = ("user", "project", "local")
#: The client's hook timeout as installed, in seconds; the hook's own deadline
#: (``[hooks] timeout_s``, 8 s) stays below it.
HOOK_TIMEOUT_S = 10
#: Marks memlane's entries (the command runs ``memlane ... hook``).
_MARK = " hook "

#: (event, matcher or None, hook arguments) per client.
EVENTS: dict[str, list[tuple[str, str | None, str]]] = {
    "claude-code": [
        ("UserPromptSubmit", None, "UserPromptSubmit"),
        ("SessionStart", "startup|clear|compact", "SessionStart"),
        ("PreCompact", None, "PreCompact"),
    ],
    # Gemini CLI 0.61: BeforeAgent's context stays in the chat history (a <hook_context>
    # part of the user turn), and PreCompress fires every turn before the CLI decides whether
    # to compress (ChatCompressionService.compress): not installed. BeforeModel sees each
    # request's messages: the tracking follows what a compression or /clear really left in
    # the history (docs/integrations.md).
    "gemini": [
        ("BeforeAgent", None, "BeforeAgent --client gemini"),
        ("SessionStart", "clear", "SessionStart --client gemini"),
        ("BeforeModel", None, "BeforeModel --client gemini"),
    ],
    # Codex CLI 0.171 (its hooks.json is Claude Code's shape, timeouts in seconds):
    # UserPromptSubmit's context lands as a developer message kept in the history; a
    # compaction replaces the history (PostCompact: after a real one); /clear starts anew.
    "codex": [
        ("UserPromptSubmit", None, "UserPromptSubmit --client codex"),
        ("SessionStart", "startup|clear", "SessionStart --client codex"),
        ("PostCompact", None, "PostCompact --client codex"),
    ],
    # Qwen Code 0.24 (Claude Code's shape in .qwen/settings.json): UserPromptSubmit fires
    # again on the continuations after a tool's result, inside one turn, with the turn's
    # prompt_id (one turn model); PreCompact fires before a compression that may not happen
    # (a summary Qwen rejects), PostCompact after one that did.
    "qwen": [
        ("UserPromptSubmit", None, "UserPromptSubmit --client qwen"),
        ("SessionStart", "startup|clear", "SessionStart --client qwen"),
        ("PostCompact", None, "PostCompact --client qwen"),
    ],
    # GitHub Copilot CLI 1.0 (version-1 files: a flat list per camelCase event, "bash").
    "copilot": [
        ("userPromptSubmitted", None, "userPromptSubmitted --client copilot"),
        ("sessionStart", None, "sessionStart --client copilot"),
        ("preCompact", None, "preCompact --client copilot"),
    ],
    "opencode": [],  # a plugin file (memlane.hooks.opencode), not hook entries
}


def default_command() -> str:
    """How the clients start memlane: the ``memlane`` script on PATH (absolute), else this
    Python with ``-m memlane``."""
    found = shutil.which("memlane")
    if found:
        return shlex.quote(str(Path(found).resolve()))
    return f"{shlex.quote(sys.executable)} -m memlane"


def settings_path(client: str, scope: str, project: Path) -> Path:
    """The settings file of ``client`` for ``scope`` (``project``: the project's folder).

    Raises:
        InvalidArgument: an unknown client or scope, or ``local`` for Gemini CLI.
    """
    if client not in CLIENTS:
        raise InvalidArgument(f"unknown client {client!r}; valid: {', '.join(CLIENTS)}")
    if scope not in SCOPES:
        raise InvalidArgument(f"unknown scope {scope!r}; valid: {', '.join(SCOPES)}")
    user, shared, name = FOLDERS[client]
    if scope == "user":
        return Path.home() / user / name
    if scope == "local":
        if client != "claude-code":
            raise InvalidArgument(f"{client} has no local settings file: use --scope project")
        return project / shared / "settings.local.json"
    return project / shared / name


def command_for(scope: str, home: str | None = None, command: str | None = None) -> str:
    """How the clients start memlane for an install of ``scope``: ``command`` when given; for
    ``project`` (a file shared with the team, committed) ``memlane`` from PATH, never a
    personal absolute path; else :func:`default_command`.

    Raises:
        InvalidArgument: ``home`` with the project scope (a personal path in a shared file).
    """
    if scope == "project" and home is not None:
        raise InvalidArgument(
            "--home is a path of your own: the project's settings file is shared with the "
            "team. Use --scope local (Claude Code) or --scope user with --home, or set "
            "MEMLANE_HOME in your environment"
        )
    if command:
        return command
    return "memlane" if scope == "project" else default_command()


def entries(client: str, command: str, home: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """memlane's hook groups for ``client``, by event, with ``command`` starting memlane (and
    ``--home home`` on every hook when given)."""
    out: dict[str, list[dict[str, Any]]] = {}
    tail = f" --home {shlex.quote(home)}" if home else ""
    for event, matcher, args in EVENTS[client]:
        hook: dict[str, Any] = {"type": "command", "command": f"{command} hook {args}{tail}"}
        if client == "copilot":  # no groups: the hooks themselves, the command under "bash"
            line = hook.pop("command")
            out[event] = [{"type": "command", "bash": line, "timeoutSec": HOOK_TIMEOUT_S}]
            continue
        if client == "gemini":
            hook = {"name": f"memlane-{event}", **hook, "timeout": HOOK_TIMEOUT_S * 1000}
        else:
            hook["timeout"] = HOOK_TIMEOUT_S
        group: dict[str, Any] = {"hooks": [hook]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        out[event] = [group]
    return out


def is_memlane(hook: Any) -> bool:
    """True for a hook configuration that runs ``memlane ... hook ...`` (the command under
    ``command``, or ``bash`` for Copilot CLI)."""
    command = hook.get("command") or hook.get("bash") if isinstance(hook, dict) else None
    return isinstance(command, str) and "memlane" in command and _MARK in f"{command} "


def _read(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The file's text (``None`` when missing) and its JSON object. Raises InvalidArgument."""
    if not path.exists():
        return None, {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(
            f"{path} is not valid JSON ({exc}); fix or move it, then run this again "
            "(the file was not changed)"
        ) from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"{path} is not a JSON object (the file was not changed)")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument(f'{path}: "hooks" is not an object (the file was not changed)')
    for event, groups in hooks.items():
        if event in {e for c in CLIENTS for e, _, _ in EVENTS[c]} and not isinstance(groups, list):
            raise InvalidArgument(
                f"{path}: hooks.{event} is not a list of hook groups (the file was not changed)"
            )
    return text, data


def _without_memlane(hooks: dict[str, Any]) -> dict[str, Any]:
    """``hooks`` with every memlane hook removed (and the groups and events left empty)."""
    out: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            out[event] = groups  # not an event list (Gemini's "enabled" flag ...): kept
            continue
        kept = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                if not is_memlane(group):  # Copilot CLI's flat list: the hook itself
                    kept.append(group)
                continue
            rest = [h for h in inner if not is_memlane(h)]
            if rest:
                kept.append({**group, "hooks": rest})
            elif not inner:
                kept.append(group)
        if kept:
            out[event] = kept
    return out


@dataclass(frozen=True, slots=True)
class Plan:
    """A change to one settings file: ``old`` is ``None`` when the file does not exist."""

    path: Path
    old: str | None
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new and not (self.old is None and not self.new)

    def diff(self) -> str:
        """A unified diff of the change ("" when nothing changes)."""
        old = (self.old or "").splitlines(keepends=True)
        return "".join(
            difflib.unified_diff(
                old,
                self.new.splitlines(keepends=True),
                fromfile=str(self.path) if self.old is not None else "/dev/null",
                tofile=str(self.path),
            )
        )


def plan(
    path: Path,
    client: str,
    *,
    install: bool,
    command: str | None = None,
    home: str | None = None,
) -> Plan:
    """The settings text after installing (or, with ``install=False``, removing) memlane's
    hooks of ``client`` (started with ``command``, on ``home`` when given). Raises
    :class:`InvalidArgument` for a malformed file."""
    if client == "opencode":  # a plugin file of memlane's own, not hook entries
        from memlane.hooks.opencode import plugin_text

        before = path.read_text(encoding="utf-8") if path.exists() else None
        text = plugin_text(command or default_command(), home) if install else ""
        return Plan(path, before, text)
    old, data = _read(path)
    hooks = _without_memlane(data.get("hooks", {}))
    if install:
        for event, groups in entries(client, command or default_command(), home).items():
            hooks[event] = [*hooks.get(event, []), *groups]
    new_data = dict(data)
    if client == "copilot":
        new_data = {"version": 1, **new_data}  # Copilot CLI reads version-1 files only
    if hooks:
        new_data["hooks"] = hooks
    else:
        new_data.pop("hooks", None)
    if old is None and not install:
        return Plan(path, None, "")  # nothing to remove from a missing file
    new = json.dumps(new_data, indent=2, ensure_ascii=False) + "\n"
    if old is not None and _same(old, new):
        new = old  # the same JSON: leave the file byte for byte
    return Plan(path, old, new)


def _same(old: str, new: str) -> bool:
    try:
        return bool(json.loads(old) == json.loads(new))
    except ValueError:
        return False


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".memlane-backup")


def apply(change: Plan) -> Path | None:
    """Write ``change`` (nothing when unchanged): the old file is copied to
    ``<file>.memlane-backup`` first (unless that backup exists: the first one, the file before
    memlane ever changed it, is kept), then the new text replaces it atomically with the old
    file's mode (a new file: 0666 less the umask). Returns the backup's path (``None``: no
    old file, or nothing changed)."""
    if not change.changed:
        return None
    path = change.path
    if not change.new:  # memlane's own file (the OpenCode plugin) uninstalled: removed
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if change.old is not None:
        mode = stat.S_IMODE(path.stat().st_mode)
        backup = backup_path(path)
        if not backup.exists():
            shutil.copy2(path, backup)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.chmod(tmp, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(change.new)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return backup


# ------------------------------------------------------------------------------ the plugin
PLUGIN_NAME = "memlane"
PLUGIN_DESCRIPTION = (
    "Long-term memory for Claude Code: before each prompt, the memories that matter for it "
    "(never the same ones twice in a row); tracking resets on /clear and compaction. "
    "Needs the memlane command on PATH."
)


def plugin_files(version: str) -> dict[str, str]:
    """The Claude Code plugin: relative path -> file text (``memlane`` found on PATH)."""
    plugin = {
        "name": PLUGIN_NAME,
        "version": version,
        "description": PLUGIN_DESCRIPTION,
    }
    hooks = {
        "description": "memlane: inject memories before each prompt; reset on clear/compact",
        "hooks": entries("claude-code", "memlane"),
    }
    mcp = {"mcpServers": {"memlane": {"command": "memlane", "args": ["mcp"]}}}
    return {
        ".claude-plugin/plugin.json": _json(plugin),
        "hooks/hooks.json": _json(hooks),
        ".mcp.json": _json(mcp),
    }


def _json(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


def write_plugin(folder: Path, version: str) -> list[Path]:
    """Write :func:`plugin_files` under ``folder``; returns the paths written."""
    written = []
    for rel, text in plugin_files(version).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
