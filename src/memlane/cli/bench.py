"""CLI commands: bench (being written)."""

from memlane.cli.app import app  # noqa: F401
