"""CLI commands: dedup (being written)."""

from memlane.cli.app import app  # noqa: F401
