"""Storage backends behind the :class:`MemoryStore` protocol."""

from memlane.store.base import MemoryStore, NewMemory, ScoredId

__all__ = ["MemoryStore", "NewMemory", "ScoredId", "open_store"]


def open_store(settings: object, embedder: object) -> MemoryStore:
    """Open the backend named by ``[store] backend`` (``sqlite`` or ``postgres``): the one
    place that chooses a backend (the engine and everything above it only see the protocol).

    Raises:
        ConfigError: ``postgres`` without the ``postgres`` extra installed.
        EmbeddingMismatch, StoreError: as the backend's ``open``.
    """
    from memlane.config import Settings
    from memlane.embeddings.base import Embedder

    assert isinstance(settings, Settings) and isinstance(embedder, Embedder)
    cfg = settings.store
    if cfg.backend == "postgres":
        try:
            from memlane.store.postgres import PostgresStore
        except ImportError as exc:
            from memlane.errors import ConfigError

            raise ConfigError(
                "store.backend",
                "postgres",
                f"needs the postgres extra ({exc.name} is missing): "
                "pip install 'memlane[postgres]'",
            ) from None
        return PostgresStore.open(
            cfg.dsn,
            model=embedder.name,
            dimension=embedder.dimension,
            busy_timeout_ms=cfg.busy_timeout_ms,
            pool_min_size=cfg.pool_min_size,
            pool_max_size=cfg.pool_max_size,
            hnsw_m=cfg.hnsw_m,
            hnsw_ef_construction=cfg.hnsw_ef_construction,
            hnsw_ef_search=cfg.hnsw_ef_search,
            connect_timeout_s=cfg.connect_timeout_s,
        )
    from memlane.store.sqlite import SQLiteStore

    return SQLiteStore.open(
        settings.db_path,
        model=embedder.name,
        dimension=embedder.dimension,
        busy_timeout_ms=cfg.busy_timeout_ms,
    )
