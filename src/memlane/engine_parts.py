"""What the bases of :class:`~memlane.engine.MemoryEngine` (:class:`~memlane.writes.Writes`,
:class:`~memlane.views.Views`, :class:`~memlane.upkeep.Upkeep`) use of the engine: the parts it
wires and the owner rule, declared once for the type checker. The engine supplies them; nothing
here exists at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlane.config import Settings
    from memlane.dedup.write import WritePath
    from memlane.embeddings import Embedder
    from memlane.embeddings.cache import Embeddings
    from memlane.llm import LLM
    from memlane.store import MemoryStore
    from memlane.types import Memory


class EngineParts:
    """The engine's parts (``store``, ``embedder``, ``embeddings``, ``writer``, ``settings``,
    ``llm``) and :meth:`~memlane.engine.MemoryEngine.owner_of` and ``get``, as its bases see
    them."""

    if TYPE_CHECKING:
        store: MemoryStore
        embedder: Embedder
        embeddings: Embeddings
        writer: WritePath
        settings: Settings
        llm: LLM | None

        def owner_of(self, owner: str | None, agent: object = None) -> str: ...

        def get(
            self,
            memory_id: str,
            *,
            owner: str | None = None,
            agent: str | None = None,
            include_inactive: bool = False,
        ) -> Memory: ...
