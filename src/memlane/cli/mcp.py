"""CLI: ``memlane mcp`` (the MCP server, stdio or ``--http``) and ``memlane mcp install``.

The ``mcp`` SDK is imported inside the command: ``import memlane.cli`` stays light.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from memlane.cli.app import HomeOption, app, err, fail, handle_errors, out
from memlane.cli.render import project_for
from memlane.cli.serve import is_loopback
from memlane.errors import InvalidArgument

mcp_app = typer.Typer(
    help="The MCP server: memlane's memory as tools for MCP clients (docs/integrations.md).",
    invoke_without_command=True,
)
app.add_typer(mcp_app, name="mcp")


@mcp_app.callback()
def mcp_cmd(
    ctx: typer.Context,
    home: HomeOption = None,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP (at /mcp) instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="Loopback address for --http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port for --http.")] = 8766,
    owner: Annotated[
        str | None,
        typer.Option(
            "--owner",
            help="Owner scope (default: [hooks] owner, else [scope] owner, else default).",
        ),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent scope (default none: shared).")
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="The project (a repository's folder or identity). Default: the repository "
            "holding the working folder, if any.",
        ),
    ] = None,
) -> None:
    """Serve memlane over MCP on stdio (what Claude Code and desktop clients start), or
    streamable HTTP on loopback with --http. Tools: remember, recall, context_for_turn,
    forget, list_memories, reset_session."""
    if ctx.invoked_subcommand is not None:
        return
    if http and not is_loopback(host):
        raise fail(
            f"--host {host} is not a loopback address: memlane mcp --http serves loopback only", 2
        )
    try:
        from memlane.mcp.server import serve
    except ImportError as exc:
        raise fail(f"memlane mcp needs the mcp extra: pip install 'memlane[mcp]' ({exc})") from None
    with handle_errors():
        serve(
            home=home, owner=owner, agent=agent, http=http, host=host, port=port,
            project=project_for(project),
        )  # fmt: skip


def mcp_entry(command: str) -> dict[str, Any]:
    """The ``mcpServers`` entry that starts ``memlane mcp`` with ``command``."""
    import shlex

    parts = shlex.split(command)
    return {"command": parts[0], "args": [*parts[1:], "mcp"]}


@mcp_app.command("install")
def install_cmd(
    client: Annotated[str, typer.Option("--client", help="claude-code.")] = "claude-code",
    project_dir: Annotated[
        Path | None, typer.Option("--project-dir", help="Where .mcp.json is (default .).")
    ] = None,
    command: Annotated[
        str | None,
        typer.Option("--command", help="How to start memlane (default: the script on PATH)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the diff; write nothing.")
    ] = False,
) -> None:
    """Register memlane's MCP server for Claude Code in the project's .mcp.json (other servers
    kept, backup first; the same as `claude mcp add --scope project memlane -- memlane mcp`)."""
    from memlane.hooks.install import Plan, apply, backup_path, default_command

    with handle_errors():
        if client != "claude-code":
            raise InvalidArgument(
                f"memlane mcp install knows claude-code only, got {client!r}; other clients: "
                "see docs/integrations.md (generic MCP)"
            )
        path = (project_dir or Path.cwd()).resolve() / ".mcp.json"
        old = path.read_text(encoding="utf-8") if path.exists() else None
        try:
            data = json.loads(old) if old and old.strip() else {}
        except ValueError as exc:
            raise InvalidArgument(
                f"{path} is not valid JSON ({exc}); the file was not changed"
            ) from None
        servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            raise InvalidArgument(f"{path}: mcpServers is not an object; the file was not changed")
        entry = mcp_entry(command or default_command())
        if servers.get("memlane") == entry:
            err.print(f"{path}: nothing to change (memlane is registered)")
            return
        new = json.dumps({**data, "mcpServers": {**servers, "memlane": entry}}, indent=2) + "\n"
        change = Plan(path, old, new)
        if dry_run:
            out.print(change.diff(), end="", markup=False, highlight=False)
            err.print(f"--dry-run: {path} not changed")
            return
        apply(change)
        saved = f" (backup: {backup_path(path)})" if old is not None else ""
        err.print(f"registered memlane's MCP server in {path}{saved}")
