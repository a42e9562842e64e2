"""CLI: ``memlane hook EVENT`` (one hook call, for Claude Code and Gemini CLI) and
``memlane hooks install|uninstall|plugin`` (docs/integrations.md).

``memlane hook`` normally never reaches Typer: the ``memlane`` script sends it straight to
:mod:`memlane.hooks.run` (``memlane._entry``); this command is the same call for ``--help`` and
for ``memlane.cli`` used as a library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.app import app


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
        typer.Option("--client", help="claude-code or gemini (default: from the event name)."),
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
