"""memlane: long-term memory for LLM agents.

Stores what an agent learns, refuses to store the same thing twice, and before every model turn
injects the memories that matter for that turn. Start with :class:`MemoryEngine`::

    from memlane import MemoryEngine

    with MemoryEngine.open() as engine:
        engine.add("Alice prefers dark mode", type="preference", owner="alice")
        block = engine.inject("chat-1", "Which theme should the app use?", owner="alice").block
"""

from memlane.config import Settings
from memlane.embeddings import Embedder, HashEmbedder, LocalEmbedder
from memlane.engine import MemoryEngine, MemoryInput
from memlane.errors import (
    ConfigError,
    CorruptStore,
    EmbeddingError,
    EmbeddingMismatch,
    InvalidArgument,
    InvalidMemory,
    LLMError,
    MemlaneError,
    NotFound,
    ReadOnlyStore,
    StoreBusy,
    StoreError,
)
from memlane.history import INJECTION_BLOCK_PREFIX
from memlane.llm import LLM, LLMVerdict
from memlane.types import (
    Association,
    ChangeReason,
    Decision,
    DedupLogEntry,
    InjectedItem,
    Injection,
    Memory,
    MemoryType,
    MemoryVersion,
    PinnedSort,
    Relation,
    ResetReason,
    ReviewStatus,
    SearchHit,
    SessionState,
    Status,
    WriteResult,
)

__version__ = "0.1.0"

__all__ = [
    "INJECTION_BLOCK_PREFIX",
    "LLM",
    "Association",
    "ChangeReason",
    "ConfigError",
    "CorruptStore",
    "Decision",
    "DedupLogEntry",
    "Embedder",
    "EmbeddingError",
    "EmbeddingMismatch",
    "HashEmbedder",
    "InjectedItem",
    "Injection",
    "InvalidArgument",
    "InvalidMemory",
    "LLMError",
    "LLMVerdict",
    "LocalEmbedder",
    "MemlaneError",
    "Memory",
    "MemoryEngine",
    "MemoryInput",
    "MemoryType",
    "MemoryVersion",
    "NotFound",
    "PinnedSort",
    "ReadOnlyStore",
    "Relation",
    "ResetReason",
    "ReviewStatus",
    "SearchHit",
    "SessionState",
    "Settings",
    "Status",
    "StoreBusy",
    "StoreError",
    "WriteResult",
    "__version__",
]
