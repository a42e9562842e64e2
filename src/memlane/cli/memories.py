"""CLI commands: memories (being written)."""

from memlane.cli.app import app  # noqa: F401
