"""Driver errors never escape the store: :func:`translating` wraps every public method of a
store class so that a driver error becomes the memlane error its backend's
:meth:`~memlane.store.sql.database.Database.translate` names (the operation is the method's name)."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

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


_P = ParamSpec("_P")


def forward(
    method: Callable[Concatenate[Any, _P], _R], part: str
) -> Callable[Concatenate[Any, _P], _R]:
    """A store method answered by one of its parts: ``name = forward(Part.name, "_part")`` in
    the store's class body calls ``Part.name`` on the store's attribute ``_part``. The signature
    (and its type, checked by mypy against the contract) is the part's, written once there; the
    store's :func:`translating` translates its driver errors like any other public method's."""
    name = method.__name__

    def call(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        result: _R = getattr(getattr(self, part), name)(*args, **kwargs)
        return result

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    return call
