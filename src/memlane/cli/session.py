"""CLI commands: session (being written)."""

from memlane.cli.app import app  # noqa: F401
