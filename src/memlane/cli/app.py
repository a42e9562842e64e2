"""The Typer application and what every command shares: ``--home``, ``--json``, error handling.

Command groups live in their own modules (``memories``, ``session``, ``dedup``, ``replay``,
``bench``) and register on :data:`app` when :mod:`memlane.cli` is imported.

Errors: whatever a command raises ends as one line on stderr, ``error: <message>``, and the exit
code of its class (:data:`EXIT_CODES`, docs/errors.md); ``--debug`` (or ``MEMLANE_DEBUG=1``)
prints the traceback before that line.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, NoReturn

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
from typer._click.exceptions import NoSuchOption
from typer.core import TyperCommand, TyperGroup

from memlane.errors import (
    ConfigError,
    CorruptStore,
    EmbeddingError,
    InvalidArgument,
    InvalidMemory,
    LLMError,
    MemlaneError,
    NotFound,
    ReadOnlyStore,
    StoreBusy,
    StoreError,
)

#: Exit code of an unexpected exception (a bug in memlane): EX_SOFTWARE of sysexits.h.
INTERNAL_ERROR = 70
#: Exit code of a usage error (Click's: unknown option, missing argument, bad value).
USAGE_ERROR = 2

#: Every exit code of the CLI and what it means (docs/errors.md has the same table).
EXIT_CODES: dict[int, str] = {
    0: "success",
    MemlaneError.exit_code: "failed: any other memlane error, or some input lines were bad",
    USAGE_ERROR: "usage error (unknown option, missing argument)",
    InvalidMemory.exit_code: f"{InvalidMemory.__name__} / {InvalidArgument.__name__}",
    NotFound.exit_code: NotFound.__name__,
    ConfigError.exit_code: ConfigError.__name__,
    EmbeddingError.exit_code: f"{EmbeddingError.__name__} (also EmbeddingMismatch)",
    StoreBusy.exit_code: f"{StoreBusy.__name__}: the write lock was held past busy_timeout_ms",
    ReadOnlyStore.exit_code: f"{ReadOnlyStore.__name__}: the store cannot be written",
    CorruptStore.exit_code: f"{CorruptStore.__name__}: not a database or damaged",
    StoreError.exit_code: f"{StoreError.__name__}: disk full, cannot open, I/O error",
    LLMError.exit_code: LLMError.__name__,
    INTERNAL_ERROR: "internal error (a bug): rerun with --debug for the traceback",
}

#: ``--debug`` of the running command (``None``: no command parsed; the environment decides).
_debug: ContextVar[bool | None] = ContextVar("memlane_debug", default=None)


#: The command list of ``memlane --help``, in the order a user meets the commands: each panel
#: (Typer's ``rich_help_panel`` of the command, set by :func:`finish`) and its commands in order.
#: A command registered on the root and missing here lands in the last panel (a test fails).
PANELS: dict[str, tuple[str, ...]] = {
    "Store and read": (
        "add",
        "import",
        "list",
        "search",
        "get",
        "history",
        "update",
        "forget",
        "restore",
        "learn",
        "export",
        "purge",
    ),
    "Inject and sessions": ("inject", "session"),
    "Dedup and review": ("dedup-log", "review", "janitor"),
    "Serve, MCP and hooks": ("serve", "proxy", "mcp", "hooks", "hook"),
    "Evaluation and benchmarks": ("replay", "dedup", "bench"),
    "Backends, models and the LLM": ("postgres", "migrate", "reembed", "llm"),
}
_OTHER_PANEL = "Other commands"


def panel_of(name: str) -> str:
    """The help panel of the root command ``name`` (:data:`PANELS`)."""
    return next((panel for panel, names in PANELS.items() if name in names), _OTHER_PANEL)


def _order(name: str) -> int:
    return next((names.index(name) for names in PANELS.values() if name in names), 0)


def _without_poor_matches(exc: Any) -> None:
    """Click suggests options by closeness of the whole flag, dashes included, so ``--json``
    gets "(Possible options: --scope)" (the shared ``--`` makes them close): keep only the
    options whose names, without dashes, are close (difflib's cutoff, 0.6)."""
    from difflib import get_close_matches

    name = str(exc.option_name).lstrip("-")
    possibilities = list(exc.possibilities or ())
    close = set(get_close_matches(name, [p.lstrip("-") for p in possibilities]))
    exc.possibilities = [p for p in possibilities if p.lstrip("-") in close]
    if not exc.possibilities and name == "json":
        exc.message += " (this command prints no JSON: it has no --json)"


class _Group(TyperGroup):
    """The root group: any exception a command lets out becomes one ``error:`` line and the exit
    code of its class, also where the command does not use :func:`handle_errors` itself. Its
    command list is grouped in panels (:data:`PANELS`), plain text like the rest of the help."""

    def invoke(self, ctx: Any) -> Any:  # Any: typer's vendored click Context
        with handle_errors():
            return super().invoke(ctx)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as exc:
            _without_poor_matches(exc)
            raise

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        panels: dict[str, list[tuple[str, Any]]] = {p: [] for p in (*PANELS, _OTHER_PANEL)}
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            panel = getattr(cmd, "rich_help_panel", None) or _OTHER_PANEL
            panels.setdefault(panel, []).append((name, cmd))
        commands = [c for cmds in panels.values() for c in cmds]
        if not commands:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in commands)
        for panel, cmds in panels.items():
            if cmds:
                cmds.sort(key=lambda c: _order(c[0]))
                with formatter.section(panel):
                    formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in cmds])


class _Command(TyperCommand):
    """A command whose usage line names its arguments as written: ``memlane get ID``, not
    Typer's ``{ID}`` for a required one, upper case as Click writes them (``[NAME]`` stays for
    an optional one)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [re.sub(r"^\{(.*)\}", lambda m: m.group(1).upper(), p) for p in pieces]

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as exc:
            _without_poor_matches(exc)
            raise


def first_sentence(doc: str | None) -> str:
    """The first sentence of a help text, whole (the command list shows it; Click would cut it
    mid-sentence at the terminal's width and add "...")."""
    text = " ".join(inspect.cleandoc(doc or "").split("\n\n")[0].split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".")


def finish(group: typer.Typer, *, root: bool = True) -> None:
    """Every command of ``group`` and its sub-groups (once all are registered): the usage line
    of :class:`_Command` and its first sentence as its line in the command list; on the root,
    each command's help panel (:data:`PANELS`)."""
    for info in group.registered_commands:
        if info.cls is None or info.cls is TyperCommand:
            info.cls = _Command
        if root:
            name = str(info.name or getattr(info.callback, "__name__", ""))
            info.rich_help_panel = panel_of(name.lower().replace("_", "-"))
        if info.short_help is None:
            info.short_help = first_sentence(info.help or (info.callback and info.callback.__doc__))
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            if not isinstance(sub.short_help, str):  # None or Typer's DefaultPlaceholder
                doc = sub.typer_instance.info.help
                sub.short_help = first_sentence(doc if isinstance(doc, str) else None)
            if root and isinstance(sub.name, str):
                sub.rich_help_panel = panel_of(sub.name)
            finish(sub.typer_instance, root=False)


app = typer.Typer(
    name="memlane",
    cls=_Group,
    help="Long-term memory for LLM agents: store without duplicates, search, inject per turn.",
    epilog="Exit codes: "
    + "; ".join(f"{code} {meaning}" for code, meaning in sorted(EXIT_CODES.items()))
    + ". See docs/errors.md.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain Click help: brackets printed as written, flags without a type
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
    str | None,
    typer.Option(
        "--owner",
        help="Owner (user or tenant) scope of the memories. Default: [scope] owner in "
        "memlane.toml (or MEMLANE_SCOPE__OWNER), else default.",
    ),
]
ProjectOption = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="A project: a folder inside a git repository (its identity is used: the remote "
        "URL, else the root commit) or an identity as memlane list --json shows it. add: the "
        "memory belongs to that project (omit: global to the owner). Reads: that project's "
        "memories and the global ones (omit: every project's).",
    ),
]
AgentOption = Annotated[
    str | None, typer.Option("--agent", help="Agent scope (omit for all agents of the owner).")
]


def stdout_closed() -> NoReturn:
    """The reader of stdout went away (``memlane list | head``): not an error. Exit 0 quietly,
    with stdout pointed at /dev/null so the interpreter's last flush cannot fail again (the
    recipe of the Python docs, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("memlane")
        except PackageNotFoundError:  # run from a source tree that was not installed
            number = "unknown (not installed)"
        sys.stdout.write(f"memlane {number}\n")
        raise typer.Exit(0)


@app.callback()
def _main(
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="Log to stderr: -v for summaries (INFO), -vv for a line per memory (DEBUG).",
            show_default=False,
        ),
    ] = 0,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="On an error, print the traceback too (also MEMLANE_DEBUG=1).",
            envvar="MEMLANE_DEBUG",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print memlane's version and exit.",
        ),
    ] = False,
) -> None:
    """Long-term memory for LLM agents: store without duplicates, search, inject per turn."""
    _debug.set(debug)
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


def fail(message: str, code: int = MemlaneError.exit_code) -> typer.Exit:
    """Print ``error: message`` on stderr; return the exit (code 1 unless given) for the caller
    to raise."""
    print_error(message)
    return typer.Exit(code=code)


def exit_code(exc: BaseException) -> int:
    """The CLI's exit code for ``exc``: its class's for a memlane error, else an internal error."""
    return exc.exit_code if isinstance(exc, MemlaneError) else INTERNAL_ERROR


def debug_enabled() -> bool:
    """``--debug`` was given (or ``MEMLANE_DEBUG`` is set to a true value)."""
    flag = _debug.get()
    if flag is not None:
        return flag
    return os.environ.get("MEMLANE_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}


def one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces (an error is one line)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn any exception into ``error: <message>`` on stderr (one line) and the exit code of its
    class (:data:`EXIT_CODES`); an unexpected one is an internal error. With ``--debug`` the
    traceback comes first. Click's own exits, aborts and usage errors pass through."""
    try:
        yield
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise  # Click's own: a chosen exit, ^C, a usage error
    except BrokenPipeError:
        stdout_closed()
    except MemlaneError as exc:
        if debug_enabled():
            traceback.print_exception(exc, file=sys.stderr)
        raise fail(one_line(str(exc)) or type(exc).__name__, exit_code(exc)) from None
    except Exception as exc:
        if debug_enabled():
            traceback.print_exception(exc, file=sys.stderr)
        detail = one_line(str(exc))
        message = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        raise fail(
            f"internal error: {message}; rerun with --debug for the traceback", INTERNAL_ERROR
        ) from None


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
