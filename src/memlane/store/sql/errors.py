"""Driver errors never escape the store: :func:`translating` wraps every public method of a
store class so that a driver error becomes the memlane error its backend's
:meth:`~memlane.store.sql.database.Database.translate` names (the operation is the method's name)."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

_C = TypeVar("_C", bound=type)
_R = TypeVar("_R")


def translating(cls: _C) -> _C:
    """Class decorator: every public method of ``cls`` raises memlane errors, never the
    driver's (the instance's ``_db`` translates). ``open`` and ``transaction`` translate their
    own (they also close or roll back)."""
    for name in dir(cls):
        attr = inspect.getattr_static(cls, name)
        if name.startswith("_") or name in {"open", "transaction"} or not inspect.isfunction(attr):
            continue
        setattr(cls, name, _translated(attr))
    return cls


def _translated(method: Callable[..., _R]) -> Callable[..., _R]:
    operation = method.__name__

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> _R:
        started = time.monotonic()
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            db = self._db
            if isinstance(exc, db.dialect.errors):
                raise db.translate(exc, operation, time.monotonic() - started) from exc
            raise

    return wrapper
