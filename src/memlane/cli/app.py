"""The Typer application and what every command shares: ``--home``, ``--json``, error handling.

Command groups live in their own modules (``memories``, ``session``, ``dedup``, ``replay``,
``bench``) and register on :data:`app` when :mod:`memlane.cli` is imported.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from memlane.errors import MemlaneError

app = typer.Typer(
    name="memlane",
    help="Long-term memory for LLM agents: store without duplicates, search, inject per turn.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: stdout for data (tables or JSON); stderr for progress and errors.
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="memlane home folder (memlane.toml and the store). Default: $MEMLANE_HOME or ~/.memlane.",
        envvar="MEMLANE_HOME",
        show_envvar=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (for scripts) instead of a table.")
]
OwnerOption = Annotated[
    str, typer.Option("--owner", help="Owner (user or tenant) scope of the memories.")
]
AgentOption = Annotated[
    str | None, typer.Option("--agent", help="Agent scope (omit for all agents of the owner).")
]


@app.callback()
def _main(
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="Log to stderr: -v for summaries (INFO), -vv for a line per memory (DEBUG).",
        ),
    ] = 0,
) -> None:
    """Long-term memory for LLM agents: store without duplicates, search, inject per turn."""
    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger("memlane")
        root.handlers[:] = [handler]
        root.setLevel(level)


def print_json(data: Any) -> None:
    """One JSON document on stdout (UTF-8, no colour codes)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def print_error(message: str) -> None:
    """``error: message`` on stderr (the message printed verbatim, brackets included)."""
    err.print(Text.assemble(("error:", "bold red"), " ", message))


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; return the exit (code 1) for the caller to raise."""
    print_error(message)
    return typer.Exit(code=1)


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn memlane errors into ``error: <message>`` on stderr and exit code 1 (2 for usage)."""
    try:
        yield
    except MemlaneError as exc:
        raise fail(str(exc)) from None


def progress_bar(*, transient: bool = False, remaining: bool = False) -> Progress:
    """A progress bar on stderr (stdout stays clean for data and ``--json``): the time elapsed, or
    the time left with ``remaining``; ``transient`` clears it when done."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn() if remaining else TimeElapsedColumn(),
        console=err,
        transient=transient,
    )
