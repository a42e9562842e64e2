"""Merging metadata (backend-neutral): what :meth:`~memlane.store.base.MemoryStore.confirm` and
the janitor's merges do with the metadata of two memories."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_metadata(existing: Mapping[str, Any], offered: Mapping[str, Any]) -> dict[str, Any]:
    """Merge offered metadata into existing: new keys added; lists unioned (order kept);
    differing scalars become the list of both — nothing the caller offered is dropped."""
    out = dict(existing)
    for key, value in offered.items():
        if value is None:
            continue
        if key not in out or out[key] is None:
            out[key] = value
            continue
        old = out[key]
        if old == value:
            continue
        if isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge_metadata(old, value)
            continue
        merged = list(old) if isinstance(old, list) else [old]
        for item in value if isinstance(value, list) else [value]:
            if item not in merged:
                merged.append(item)
        out[key] = merged
    return out
