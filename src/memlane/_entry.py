"""The ``memlane`` script and ``python -m memlane``: ``memlane hook ...`` goes straight to the
hook (:mod:`memlane.hooks.run`, a few standard library modules) without loading the Typer
application and every command module (~0.5 s), and ends without the interpreter's shutdown
when the engine did not run in the process (:func:`exit_now`); everything else goes to
:mod:`memlane.cli`."""

from __future__ import annotations

import sys

#: Options of the ``memlane`` application that may come before ``hook`` (``memlane -v hook``).
GLOBAL_FLAGS = frozenset({"-v", "-vv", "-vvv", "--verbose", "-q", "--quiet"})


def main() -> None:
    """Entry point of the ``memlane`` script."""
    args = sys.argv[1:]
    lead = 0
    while lead < len(args) and args[lead] in GLOBAL_FLAGS:
        lead += 1
    if args[lead : lead + 1] == ["hook"] and not {"-h", "--help"} & set(args):
        try:
            from memlane.hooks.run import main as hook

            code = hook(args[lead + 1 :])
        except Exception:  # never in the user's way: not even a broken install (exit 0)
            code = 0
        if "memlane.engine" not in sys.modules:
            exit_now(code)
        sys.exit(code)  # the engine ran in this process: let it shut down as usual
    from memlane.cli import main as cli

    cli()


def exit_now(code: int) -> None:
    """Flush stdout and stderr and end the process without the interpreter's shutdown
    (:func:`os._exit`): the hook's light path has written and closed everything, and tearing
    down its ~50 modules and the worker thread's state costs a few milliseconds of every hook
    call (measured: ~5 ms of CPU under load, 10-15 % of the process)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 (contextlib is not imported on the hook's path)
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # a closed or missing stream: nothing more to write
    os._exit(code)
