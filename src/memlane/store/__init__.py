"""Storage backends behind the :class:`MemoryStore` protocol."""

from memlane.store.base import MemoryStore, NewMemory, ScoredId

__all__ = ["MemoryStore", "NewMemory", "ScoredId", "open_store"]


def open_store(settings: object, embedder: object) -> MemoryStore:
    """Open the backend named by ``[store] backend`` (``sqlite``)."""
    from memlane.config import Settings
    from memlane.embeddings.base import Embedder
    from memlane.store.sqlite import SQLiteStore

    assert isinstance(settings, Settings) and isinstance(embedder, Embedder)
    return SQLiteStore.open(
        settings.db_path,
        model=embedder.name,
        dimension=embedder.dimension,
        busy_timeout_ms=settings.store.busy_timeout_ms,
    )
