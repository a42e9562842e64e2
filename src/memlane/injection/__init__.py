"""Turn-by-turn memory injection (ARCHITECTURE.md, "Injection")."""

from memlane.injection.pipeline import Injector, build_query, format_block
from memlane.injection.sessions import Sessions
from memlane.injection.trivial import is_trivial

__all__ = ["Injector", "Sessions", "build_query", "format_block", "is_trivial"]
