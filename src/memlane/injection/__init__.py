"""Turn-by-turn memory injection (ARCHITECTURE.md, "Injection")."""

from memlane.injection.pipeline import format_block, inject, is_trivial

__all__ = ["format_block", "inject", "is_trivial"]
