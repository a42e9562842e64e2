"""The one error hierarchy of memlane.

::

    MemlaneError                    root: catch this to catch everything memlane raises
    ├── InvalidMemory (ValueError)  a memory that must not be stored (empty, too long, an injected block)
    ├── InvalidArgument (ValueError) a bad argument to an API call (unknown reset reason, bad mode ...)
    ├── NotFound (LookupError)      no memory / session with that id in that scope
    ├── ConfigError (ValueError)    an invalid setting: names the key, the value and what is allowed
    ├── EmbeddingError              the embedding model failed or is not installed; nothing was written
    │   └── EmbeddingMismatch       the store was built with another model or dimension
    ├── StoreError                  the storage backend failed (the write was rolled back)
    └── LLMError                    the configured LLM failed or timed out (the write path falls back)

Every message says what went wrong and how to fix it.
"""

from __future__ import annotations


class MemlaneError(Exception):
    """Root of every error memlane raises."""


class InvalidMemory(MemlaneError, ValueError):
    """A memory that must not be stored: nothing was written."""


class InvalidArgument(MemlaneError, ValueError):
    """An argument outside what the call accepts."""


class NotFound(MemlaneError, LookupError):
    """No object with that id in that scope."""

    def __str__(self) -> str:  # LookupError would repr() the message
        return str(self.args[0]) if self.args else "not found"


class ConfigError(MemlaneError, ValueError):
    """An invalid setting; the message names the key, the value and what is allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid setting {key} = {value!r}: {allowed}")


class EmbeddingError(MemlaneError):
    """The embedding model failed or is not available; nothing was written."""


class EmbeddingMismatch(EmbeddingError):
    """The store was built with another embedding model or dimension."""


class StoreError(MemlaneError):
    """The storage backend failed; the transaction was rolled back."""


class LLMError(MemlaneError):
    """The configured LLM failed or timed out."""
