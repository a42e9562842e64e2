"""CLI: ``memlane hook EVENT`` (one hook call, for Claude Code and Gemini CLI) and
``memlane hooks install|uninstall|plugin|migrate`` (docs/integrations.md).

``memlane hook`` normally never reaches Typer: the ``memlane`` script sends it straight to
:mod:`memlane.hooks.run` (``memlane._entry``); this command is the same call for ``--help`` and
for ``memlane.cli`` used as a library.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from memlane.cli.app import (
    HomeOption,
    JsonOption,
    OwnerOption,
    app,
    err,
    handle_errors,
    out,
    print_json,
    progress_bar,
)
from memlane.cli.bench import (
    BatchOption,
    BenchHomeOption,
    CacheOption,
    MemoriesOption,
    RebuildOption,
    SeedOption,
    _prepare,
    bench_app,
)
from memlane.cli.render import engine_for, project_for
from memlane.errors import InvalidArgument


@app.command("hook")
def hook_cmd(
    event: Annotated[
        str,
        typer.Argument(
            help="UserPromptSubmit, SessionStart, PreCompact, SessionEnd, Stop (Claude Code); "
            "BeforeAgent, SessionStart, PreCompress, SessionEnd (Gemini CLI)."
        ),
    ],
    client: Annotated[
        str | None,
        typer.Option(
            "--client",
            help="claude-code, gemini, codex, qwen, copilot or opencode (default: from the "
            "event name).",
        ),
    ] = None,
    home: Annotated[
        Path | None, typer.Option("--home", help="memlane home (default $MEMLANE_HOME).")
    ] = None,
) -> None:
    """Run one hook call: read the client's JSON on stdin, inject or reset, print the
    hookSpecificOutput JSON. Always exits 0; failures go to <home>/logs/hooks.log."""
    from memlane.hooks.run import main

    argv = [event]
    if client:
        argv += ["--client", client]
    if home is not None:
        argv += ["--home", str(home)]
    raise typer.Exit(main(argv))


hooks_app = typer.Typer(
    help="Install memlane's hooks into Claude Code or Gemini CLI, or write the Claude Code "
    "plugin (docs/integrations.md).",
    no_args_is_help=True,
)
app.add_typer(hooks_app, name="hooks")

ClientOption = Annotated[
    str,
    typer.Option(
        "--client", help="claude-code, gemini, codex, qwen, copilot or opencode.", show_default=True
    ),
]
ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope",
        help="user (~/.claude or ~/.gemini), project (.claude/settings.json), "
        "local (.claude/settings.local.json, Claude Code only).",
    ),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the diff; write nothing.")]
ProjectOption = Annotated[
    Path | None,
    typer.Option("--project-dir", help="The project folder for --scope project|local (default .)."),
]
CommandOption = Annotated[
    str | None,
    typer.Option(
        "--command",
        help="How the client starts memlane (default: user/local scope the memlane script "
        "on PATH, absolute; project scope `memlane` from PATH).",
    ),
]


def _change(
    install: bool,
    client: str,
    scope: str,
    dry_run: bool,
    project: Path | None,
    command: str | None,
    home: Path | None = None,
) -> None:
    import shutil

    from memlane.hooks.install import apply, command_for, plan, settings_path

    path = settings_path(client, scope, (project or Path.cwd()).resolve())
    where = str(home.expanduser().resolve()) if home is not None else None
    start = command_for(scope, where, command) if install else None
    change = plan(path, client, install=install, command=start, home=where)
    verb = "install" if install else "uninstall"
    if not change.changed:
        err.print(f"{path}: nothing to change (memlane's hooks already {verb}ed)")
    elif dry_run:
        out.print(change.diff(), end="", markup=False, highlight=False)
        err.print(f"--dry-run: {path} not changed")
    else:
        backup = apply(change)
        saved = f" (backup: {backup})" if backup else ""
        err.print(f"{verb}ed memlane's {client} hooks in {path}{saved}")
    if install and client == "codex" and not dry_run:
        _trust_codex(path, (project or Path.cwd()).resolve())
    if install and start == "memlane" and shutil.which("memlane") is None:
        err.print(
            "note: the hooks run `memlane` from PATH (a project's settings are shared), and "
            "it is not on PATH here: install memlane so that it is (pipx install memlane), "
            "or use --scope user, which records this installation's absolute path"
        )


def _trust_codex(path: Path, cwd: Path) -> None:
    """Codex runs only hooks someone trusted: record the trust of memlane's entries as
    Codex's /hooks does (:mod:`memlane.hooks.codex`), or say what to run."""
    from memlane.hooks.codex import MANUAL, TrustError, trust

    try:
        keys = trust(path, cwd)
    except TrustError as exc:
        err.print(f"Codex skips hooks nobody trusted, and memlane could not trust them: {exc}")
        err.print(f"to trust them: {MANUAL}", markup=False, highlight=False)
        return
    if keys:
        err.print(f"trusted memlane's {len(keys)} Codex hooks (recorded by Codex in config.toml)")
    else:
        err.print("memlane's Codex hooks were already trusted")


@hooks_app.command("install")
def install_cmd(
    client: ClientOption = "claude-code",
    scope: ScopeOption = "user",
    dry_run: DryRunOption = False,
    project_dir: ProjectOption = None,
    command: CommandOption = None,
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            help="The memlane home the hooks use, written into every hook's command "
            "(default: none written: the hooks use $MEMLANE_HOME, else ~/.memlane).",
        ),
    ] = None,
) -> None:
    """Merge memlane's hooks into the client's settings file: other hooks and keys are kept,
    the file's mode is kept, a backup (<file>.memlane-backup, the file before memlane first
    changed it) is written once, a second run changes nothing. --home goes into every hook's
    command. --scope project writes `memlane` from PATH (no path of yours in a shared file)."""
    with handle_errors():
        _change(True, client, scope, dry_run, project_dir, command, home)


@hooks_app.command("uninstall")
def uninstall_cmd(
    client: ClientOption = "claude-code",
    scope: ScopeOption = "user",
    dry_run: DryRunOption = False,
    project_dir: ProjectOption = None,
) -> None:
    """Remove memlane's hooks from the client's settings file (other hooks kept; backup
    first)."""
    with handle_errors():
        _change(False, client, scope, dry_run, project_dir, None)


@hooks_app.command("plugin")
def plugin_cmd(
    folder: Annotated[Path, typer.Argument(help="Where to write the plugin.")],
) -> None:
    """Write the Claude Code plugin: .claude-plugin/plugin.json, hooks/hooks.json, .mcp.json
    (the commands run `memlane` from PATH). Install with `claude plugin install` from a
    marketplace, or use it with `claude --plugin-dir FOLDER`."""
    from memlane import __version__
    from memlane.hooks.install import write_plugin

    with handle_errors():
        for path in write_plugin(folder, __version__):
            out.print(str(path), highlight=False)


@hooks_app.command("migrate")
def migrate_cmd(
    folders: Annotated[
        list[Path] | None,
        typer.Argument(help="Folders inside the repositories to migrate (default: .)."),
    ] = None,
    owner: OwnerOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move the memories that older hooks stored under a per-project agent
    (claude-code@<folder>-<hash of its path>) into the project scope of each repository given:
    the same agent without the suffix, the repository's project. Only the repository can say
    which hash is its own, so name each one (its folder, or any folder inside it). The newer
    form, claude-code@<project identity>, moved when the store was migrated. A second run
    moves nothing. A folder outside any repository exits 3 and nothing is moved."""
    from memlane.hooks.legacy import migrate

    chosen = folders or [Path.cwd()]
    with engine_for(home) as engine:
        for folder in chosen:  # every folder checked before anything moves
            project_for(str(folder.expanduser().resolve()))
        moved = [m for folder in chosen for m in migrate(engine, folder, owner=owner)]
    if as_json:
        print_json([vars(m) for m in moved])
        return
    if not moved:
        err.print("nothing to move: no memory of these repositories under an older agent name")
        return
    table = Table("agent before", "agent now", "project", "memories")
    for m in moved:
        table.add_row(m.agent, m.new_agent, m.project, str(m.count))
    out.print(table)


@bench_app.command("hooks")
def bench_hooks_cmd(
    memories: MemoriesOption = 10_000,
    prompts: Annotated[
        int, typer.Option("--prompts", min=1, help="Hook runs timed per path (fresh processes).")
    ] = 100,
    mcp: Annotated[
        bool, typer.Option("--mcp/--no-mcp", help="Also time recall/context_for_turn over MCP.")
    ] = True,
    daemon: Annotated[
        bool,
        typer.Option(
            "--daemon/--no-daemon",
            help="Also time the path with no server configured: the first call (it starts the "
            "memory daemon) and the next PROMPTS calls.",
        ),
    ] = True,
    claude_turns: Annotated[
        int,
        typer.Option(
            "--claude-turns",
            min=0,
            help="Time this many real `claude -p` turns with memlane's hooks and as many "
            "without, alternately, against a fake model server (0: skip).",
        ),
    ] = 10,
    claude: Annotated[
        str | None,
        typer.Option(
            "--claude",
            help="Claude Code's executable (default: .clients/ of this folder, from `make "
            "clients`, else `claude` on PATH).",
        ),
    ] = None,
    seed: SeedOption = 0,
    batch: BatchOption = 256,
    home: BenchHomeOption = None,
    cache_dir: CacheOption = None,
    rebuild: RebuildOption = False,
    json_out: JsonOption = False,
) -> None:
    """Time `memlane hook UserPromptSubmit` as a fresh process per prompt, without a server
    (cold: the model loads in the hook) and with `memlane serve` running; then MCP recall and
    context_for_turn in one session. Runs on a copy of the cached store of N memories.

    Example: memlane bench hooks --memories 10000 --json
    """
    from memlane.eval.bench.hooks import run_hooks

    with handle_errors():
        # before minutes of timing: a missing Claude Code used to fail only at the last part
        found = _claude_for(claude) if claude_turns else None
        prepared = _prepare(memories, seed, home, cache_dir, rebuild, batch)
        with progress_bar(transient=True) as bar:
            tasks: dict[str, Any] = {}

            def update(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(f"hook, {label}", total=total)
                bar.update(tasks[label], completed=done)

            result = run_hooks(
                prepared,
                seed=seed,
                prompts=prompts,
                mcp=mcp,
                daemon=daemon,
                claude_turns=claude_turns,
                claude=found,
                progress=update,
            )
    if json_out:
        print_json(result)
        return
    table = Table(
        title=f"bench hooks: {result['memories']:,} memories ({result['embedder']}), "
        f"{prompts} prompts, a fresh process each",
        title_justify="left",
    )
    for col in ("what", "p50 ms", "p95 ms", "max ms", "printed", "failures"):
        table.add_column(col, justify="right")
    for label, key in (
        ("hook, memlane serve", "hook_with_server"),
        ("hook, no server", "hook_without_server"),
    ):
        r = result[key]
        table.add_row(
            label,
            f"{r['p50_ms']:.1f}",
            f"{r['p95_ms']:.1f}",
            f"{r['max_ms']:.1f}",
            str(r["printed"]),
            str(r["failures"]),
        )
    for client, r in result.get("per_client", {}).items():
        table.add_row(f"{client} hook, memlane serve", f"{r['p50_ms']:.1f}",
                      f"{r['p95_ms']:.1f}", f"{r['max_ms']:.1f}", str(r["printed"]),
                      str(r["failures"]))  # fmt: skip
    alone = result["no_server_configured"]
    if alone:
        r = alone["later"]
        table.add_row("first call, no server (starts the daemon)", f"{alone['first_ms']:.1f}",
                      "-", "-", "-", str(alone["first_failures"]))  # fmt: skip
        table.add_row(f"next {r['runs']} calls (daemon; {alone['later_in_process']} in-process)",
                      f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}", f"{r['max_ms']:.1f}",
                      str(r["printed"]), str(r["failures"]))  # fmt: skip
    turns = result["claude_turn"]
    if turns:
        for label, key in (("without", "without_median_ms"), ("with", "with_median_ms")):
            table.add_row(f"claude -p turn {label} hooks (median of {turns['turns']})",
                          f"{turns[key]:.1f}", "-", "-", "-", "-")  # fmt: skip
        table.add_row("claude -p turn, added by the hooks", f"{turns['added_median_ms']:.1f}",
                      "-", "-", str(turns["requests_with_a_block"]), "-")  # fmt: skip
        table.add_row("turn in a running session, added",
                      f"{turns['session_added_median_ms']:.1f}", "-", "-", "-", "-")  # fmt: skip
    if result["mcp"]:
        for tool in ("recall", "context_for_turn"):
            r = result["mcp"][tool]
            table.add_row(
                f"MCP {tool}",
                f"{r['p50_ms']:.1f}",
                f"{r['p95_ms']:.1f}",
                f"{r['max_ms']:.1f}",
                "-",
                str(result["mcp"]["errors"]),
            )
    out.print(table)
    goals = result["goals"]
    err.print(
        f"goals: p95 with the server <= {goals['server_p95_ms']:.0f} ms: "
        f"{'met' if goals['server_p95_met'] else 'NOT met'}; cold <= {goals['cold_ms']:.0f} ms: "
        f"{'met' if goals['cold_p95_met'] else 'NOT met'} (p95)"
    )
    clients = result.get("per_client") or {}
    if clients:
        worst = max(clients, key=lambda name: clients[name]["p95_ms"])
        verdict = "met" if goals["per_client_p95_met"] else "NOT met"
        err.print(
            f"goals: every client's hook p95 with the server <= {goals['server_p95_ms']:.0f} ms: "
            f"{verdict} (highest: {worst} {clients[worst]['p95_ms']:.1f} ms)"
        )
    for label, met, goal in (
        ("no server configured, first call", "first_met", "first_ms"),
        ("no server configured, later calls p95", "later_p95_met", "later_p95_ms"),
        ("claude -p run added (median)", "claude_added_met", "claude_added_ms"),
        ("turn in a running session added (median)", "session_added_met", "claude_added_ms"),
    ):
        if goals[met] is not None:
            verdict = "met" if goals[met] else "NOT met"
            err.print(f"goals: {label} <= {goals[goal]:.0f} ms: {verdict}")
    err.print("(timings on a shared or loaded machine vary: compare runs of the same machine)")


def _claude_for(given: str | None) -> Path:
    """Claude Code's executable for ``--claude-turns`` (``--claude``, else ``.clients/`` of this
    folder, else PATH). Raises :class:`InvalidArgument` naming the fixes when there is none or
    it cannot be run."""
    from memlane.eval.bench.hooks_e2e import find_claude

    found = find_claude(given)
    if found is None or not found.is_file() or not os.access(found, os.X_OK):
        where = f"{given!r} is not an executable file" if given else "none found"
        raise InvalidArgument(
            f"--claude-turns needs Claude Code: {where}. Run `make clients` in memlane's "
            "checkout and run the bench from there, give --claude PATH, or skip that part "
            "with --claude-turns 0."
        )
    return found
