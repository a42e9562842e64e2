"""The one error hierarchy of memlane.

::

    MemlaneError                      root: catch it to catch all that memlane raises  exit 1
    ├── InvalidMemory (ValueError)    a memory that must not be stored (empty ...)     exit 3
    ├── InvalidArgument (ValueError)  a bad argument to an API call (bad mode ...)     exit 3
    ├── NotFound (LookupError)        no memory / session with that id in that scope   exit 4
    ├── ConfigError (ValueError)      an invalid setting: key, value, what is allowed  exit 5
    ├── EmbeddingError                the embedding model failed; nothing was written  exit 6
    │   └── EmbeddingMismatch         the store was built with another model           exit 6
    ├── StoreError                    the store failed (the write was rolled back)     exit 10
    │   ├── StoreBusy                 another process held the write lock too long     exit 7
    │   ├── ReadOnlyStore             the file, its -wal/-shm or its folder read-only  exit 8
    │   └── CorruptStore              not a SQLite database, or damaged                exit 9
    └── LLMError                      the configured LLM failed or timed out           exit 11

A :class:`StoreError` carries ``operation`` and ``path`` when known: disk full, a folder that
cannot be created, an I/O error are plain ``StoreError``; "too long" for :class:`StoreBusy` is
``[store] busy_timeout_ms`` in all.

Every message says what went wrong and how to fix it. The CLI prints it as one line,
``error: <message>``, and exits with the class's :attr:`~MemlaneError.exit_code` (the number on
the right above). Other exit codes of the CLI: 0 success, 2 a usage error (unknown option,
missing argument), 70 an internal error (a bug: rerun with ``--debug`` for the traceback).
See docs/errors.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar


class MemlaneError(Exception):
    """Root of every error memlane raises."""

    #: Exit code of the CLI for this class of error (see the table above).
    exit_code: ClassVar[int] = 1


class InvalidMemory(MemlaneError, ValueError):
    """A memory that must not be stored: nothing was written."""

    exit_code = 3


class InvalidArgument(MemlaneError, ValueError):
    """An argument outside what the call accepts."""

    exit_code = 3


class NotFound(MemlaneError, LookupError):
    """No object with that id in that scope."""

    exit_code = 4

    def __str__(self) -> str:  # LookupError would repr() the message
        return str(self.args[0]) if self.args else "not found"


class ConfigError(MemlaneError, ValueError):
    """An invalid setting; the message names the key, the value and what is allowed."""

    exit_code = 5

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid setting {key} = {value!r}: {allowed}")


class EmbeddingError(MemlaneError):
    """The embedding model failed or is not available; nothing was written."""

    exit_code = 6


class EmbeddingMismatch(EmbeddingError):
    """The store was built with another embedding model or dimension."""


class StoreError(MemlaneError):
    """The storage backend failed; the transaction was rolled back.

    ``operation`` (what the store was doing: ``"open"``, ``"insert"``, ``"commit"`` ...) and
    ``path`` (the store's file) are set when known; ``StoreError("message")`` alone also works.
    """

    exit_code = 10

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.path = None if path is None else Path(path)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "the store failed"


class StoreBusy(StoreError):
    """Another process held the store's write lock longer than ``[store] busy_timeout_ms``."""

    exit_code = 7


class ReadOnlyStore(StoreError):
    """The store cannot be written: the file, its ``-wal``/``-shm`` files or its folder are
    read-only (permissions, a read-only mount)."""

    exit_code = 8


class CorruptStore(StoreError):
    """The store's file is not a SQLite database or is damaged: restore it from a backup."""

    exit_code = 9


class LLMError(MemlaneError):
    """The configured LLM failed or timed out."""

    exit_code = 11
