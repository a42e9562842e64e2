"""What the front doors show that is not a memory operation: the store's statistics, a
session's recent injection events, memories by id, the model's name and runtime. A base of
:class:`~memlane.engine.MemoryEngine`, so that the doors (CLI, HTTP server, pages, MCP, hooks)
read through the engine only, never ``engine.store`` or ``engine.embedder``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane.engine_parts import EngineParts
from memlane.privacy import clean_name
from memlane.types import Memory


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Memories counted by owner and by type (active ones) and by status (every one), the
    bytes the store takes on disk (0 when asked for one owner: the size is the whole
    store's), and the embedding model's name."""

    memories_by_owner: dict[str, int] = field(default_factory=dict)
    memories_by_type: dict[str, int] = field(default_factory=dict)
    memories_by_status: dict[str, int] = field(default_factory=dict)
    store_bytes: int = 0
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields by name."""
        return {
            "memories_by_owner": dict(self.memories_by_owner),
            "memories_by_type": dict(self.memories_by_type),
            "memories_by_status": dict(self.memories_by_status),
            "store_bytes": self.store_bytes,
            "model": self.model,
        }


class Views(EngineParts):
    """Read-only views for the doors (see the module docstring)."""

    @property
    def model_name(self) -> str:
        """The embedding model's name (as the store records it)."""
        return self.embedder.name

    @property
    def model_backend(self) -> str | None:
        """What runs the embedding model, as the model says (the local model: its runtime and
        weights, e.g. ``"onnxruntime (int8, ...)"``); ``None`` for a model that names none (the
        replay report's ``settings.embedding.backend``)."""
        backend = getattr(self.embedder, "backend", None)
        return None if backend is None else str(backend)

    @property
    def store_id(self) -> str:
        """The store's stable id (:attr:`~memlane.store.base.MemoryStore.store_id`): what a
        server records beside its address, so a client can tell it serves this store."""
        return self.store.store_id

    def stats(self, owner: str | None = None) -> StoreStats:
        """Counts of ``owner``'s memories (every owner's with ``None``) and, for every owner,
        the store's size in bytes. Raises :class:`~memlane.errors.StoreError`."""
        by_owner: Counter[str] = Counter()
        by_type: Counter[str] = Counter()
        by_status: Counter[str] = Counter()
        for who, mtype, status, n in self.store.counts(owner):
            by_status[status] += n
            if status == "active":
                by_owner[who] += n
                by_type[mtype] += n
        return StoreStats(
            memories_by_owner=dict(by_owner),
            memories_by_type=dict(by_type),
            memories_by_status=dict(by_status),
            store_bytes=self.store.size_bytes() if owner is None else 0,
            model=self.model_name,
        )

    def count(self, owner: str | None = None) -> int:
        """Active memories of ``owner`` (of every owner with ``None``)."""
        return self.store.count(owner)

    def counts(self, owner: str | None = None) -> list[tuple[str, str, str, int]]:
        """``(owner, type, status, n)`` per group of memories (of ``owner`` when given)."""
        return self.store.counts(owner)

    def agent_counts(self) -> list[tuple[str, str | None, int]]:
        """``(owner, agent, n)``: active memories per owner and agent (``None``: shared)."""
        return self.store.agent_counts()

    def size_bytes(self) -> int:
        """Bytes the store takes on disk (the whole store's: every owner's)."""
        return self.store.size_bytes()

    def session_list(self, owner: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]:
        """``owner``'s sessions, most recently used first, at most ``limit`` (each:
        ``session``, ``turn``, ``updated_at``, ``last_reset_reason``, ``events``)."""
        return self.store.sessions(self.owner_of(owner), limit)

    def session_events(
        self, session: str, *, owner: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """``session``'s latest injection events, newest first, at most ``limit`` (each:
        ``turn``, ``memory_ids``, ``skipped``, ``elapsed_ms``, ``created_at``)."""
        return self.store.injection_events(self.owner_of(owner), clean_name(session), limit)

    def get_many(self, ids: Sequence[str], *, owner: str | None = None) -> dict[str, Memory]:
        """``{id: memory}`` of ``owner``'s memories among ``ids`` (any status); other ids are
        left out."""
        return self.store.get_many(self.owner_of(owner), list(ids)) if ids else {}
