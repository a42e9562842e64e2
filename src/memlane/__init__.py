"""memlane: long-term memory for LLM agents.

Stores what an agent learns, refuses to store the same thing twice, and before every model turn
injects the memories that matter for that turn. Start with :class:`MemoryEngine`::

    from memlane import MemoryEngine

    with MemoryEngine.open() as engine:
        engine.add("Alice prefers dark mode", type="preference", owner="alice")
        block = engine.inject("chat-1", "Which theme should the app use?", owner="alice").block
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's fast path)
if TYPE_CHECKING:  # the names below are imported on first use (PEP 562 ``__getattr__``)
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
        Turn,
        TurnBlock,
        WriteResult,
    )


#: Exported name -> the module that defines it. Imported on first access: ``import memlane``
#: (and so every ``memlane.*`` submodule, such as the ``memlane hook`` fast path) loads none of
#: the engine, numpy or pydantic until a name is used.
_EXPORTS: dict[str, str] = {
    "Settings": "memlane.config",
    "Embedder": "memlane.embeddings",
    "HashEmbedder": "memlane.embeddings",
    "LocalEmbedder": "memlane.embeddings",
    "MemoryEngine": "memlane.engine",
    "MemoryInput": "memlane.engine",
    "ConfigError": "memlane.errors",
    "CorruptStore": "memlane.errors",
    "EmbeddingError": "memlane.errors",
    "EmbeddingMismatch": "memlane.errors",
    "InvalidArgument": "memlane.errors",
    "InvalidMemory": "memlane.errors",
    "LLMError": "memlane.errors",
    "MemlaneError": "memlane.errors",
    "NotFound": "memlane.errors",
    "ReadOnlyStore": "memlane.errors",
    "StoreBusy": "memlane.errors",
    "StoreError": "memlane.errors",
    "INJECTION_BLOCK_PREFIX": "memlane.history",
    "LLM": "memlane.llm",
    "LLMVerdict": "memlane.llm",
    "Association": "memlane.types",
    "ChangeReason": "memlane.types",
    "Decision": "memlane.types",
    "DedupLogEntry": "memlane.types",
    "InjectedItem": "memlane.types",
    "Injection": "memlane.types",
    "Memory": "memlane.types",
    "MemoryType": "memlane.types",
    "MemoryVersion": "memlane.types",
    "PinnedSort": "memlane.types",
    "Relation": "memlane.types",
    "ResetReason": "memlane.types",
    "ReviewStatus": "memlane.types",
    "SearchHit": "memlane.types",
    "SessionState": "memlane.types",
    "Status": "memlane.types",
    "Turn": "memlane.types",
    "TurnBlock": "memlane.types",
    "WriteResult": "memlane.types",
}


def __getattr__(name: str) -> object:
    """Import an exported name from its module on first use (then cached in this module)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memlane' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


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
    "Turn",
    "TurnBlock",
    "WriteResult",
    "__version__",
]
