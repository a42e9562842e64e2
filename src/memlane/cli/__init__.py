"""The ``memlane`` command line (Typer). ``python -m memlane`` is the same CLI."""

from __future__ import annotations

from memlane.cli import (  # noqa: F401  (registers commands)
    bench,
    bench_embed,
    bench_janitor,
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
    read,
    reembed,
    replay,
    review,
    serve,
    session,
)
from memlane.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``memlane`` script."""
    app()
