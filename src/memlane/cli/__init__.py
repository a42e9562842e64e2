"""The ``memlane`` command line (Typer). ``python -m memlane`` is the same CLI."""

from __future__ import annotations

import os
import sys

from memlane.cli import (  # noqa: F401  (registers commands)
    bench,
    bench_embed,
    bench_janitor,
    bench_proxy,
    bench_secrets,
    dedup,
    hooks,
    janitor,
    learn,
    llm,
    mcp,
    memories,
    postgres,
    privacy,
    proxy,
    read,
    reembed,
    replay,
    restore,
    review,
    serve,
    session,
)
from memlane.cli.app import app, finish

finish(app)

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``memlane`` script. A reader that closed stdout early (``memlane list
    | head``) is not an error: exit 0 without a traceback."""
    try:
        app()
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
