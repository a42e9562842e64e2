"""The search caches saved to a folder (SQLite: ``<db>.vec/``), so a cold process need not rebuild
them. Backend-neutral: a file is tied to a store by the id the backend gives
(:meth:`~memlane.store.index_cache.ChangeFeed.store_id`), never trusted otherwise.

One owner's files are named by a digest of the owner (``sha256(owner)[:24]``):

- ``<digest>.usearch`` + ``<digest>.json``: the HNSW index (usearch's own format) and its meta
  ``{"store", "owner", "dimension", "watermark", "count"}``;
- ``<digest>.bm25.npz``: the BM25 index (:meth:`~memlane.store.text_index.TextIndex.to_arrays`)
  plus a ``meta`` entry ``{"store", "owner", "watermark", "tokens"}`` (``tokens``:
  :data:`~memlane.store.text_index.TOKENS_VERSION`).

A file that is missing, damaged, of another store, dimension or tokens version loads as ``None``
(the caller rebuilds from the rows). Saving writes a temporary file and renames it; a failed save
is reported as ``False`` and is harmless (caches).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memlane._files import FILE_MODE, private_dir
from memlane.store.text_index import TOKENS_VERSION, TextIndex
from memlane.store.vector_index import OwnerIndex

VECTOR_SUFFIX = ".usearch"
TEXT_SUFFIX = ".bm25.npz"


def cache_file(folder: Path, owner: str, suffix: str) -> Path:
    """The file of ``owner``'s cache with ``suffix`` (:data:`VECTOR_SUFFIX`, ``.json``,
    :data:`TEXT_SUFFIX`) in ``folder``."""
    digest = hashlib.sha256(owner.encode("utf-8")).hexdigest()[:24]
    return folder / f"{digest}{suffix}"


def load_vector(folder: Path, owner: str, store_id: str, dimension: int) -> OwnerIndex | None:
    """``owner``'s saved vector index (watermark and ``saved_at`` as saved), or ``None``."""
    file = cache_file(folder, owner, VECTOR_SUFFIX)
    meta_file = file.with_suffix(".json")
    if not (file.is_file() and meta_file.is_file()):
        return None
    try:
        meta = json.loads(meta_file.read_text())
        if meta.get("store") != store_id or meta.get("dimension") != dimension:
            return None
        index = OwnerIndex(dimension)
        index._index.load(str(file))
        index.watermark = int(meta["watermark"])
        if len(index) != int(meta["count"]):
            return None
        index.saved_at = index.watermark  # on disk as it is: no need to write it again
        return index
    except (OSError, ValueError, KeyError, RuntimeError):
        return None


def load_text(folder: Path, owner: str, store_id: str) -> TextIndex | None:
    """``owner``'s saved BM25 index (watermark and ``saved_at`` as saved), or ``None``."""
    file = cache_file(folder, owner, TEXT_SUFFIX)
    if not file.is_file():
        return None
    try:
        with np.load(file, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("store") != store_id or meta.get("tokens") != TOKENS_VERSION:
                return None
            index = TextIndex.from_arrays(data)
        index.watermark = int(meta["watermark"])
        index.saved_at = index.watermark
        return index
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_vector(folder: Path, owner: str, store_id: str, index: OwnerIndex) -> bool:
    """Write ``owner``'s vector index and its meta; on success ``index.saved_at`` becomes its
    watermark. ``False`` (nothing raised) when the folder cannot be written."""
    file = cache_file(folder, owner, VECTOR_SUFFIX)
    meta = {
        "store": store_id,
        "owner": owner,
        "dimension": index.dimension,
        "watermark": index.watermark,
        "count": len(index),
    }
    if write_atomic(file, lambda tmp: index._index.save(str(tmp))) and write_atomic(
        file.with_suffix(".json"), lambda tmp: tmp.write_text(json.dumps(meta))
    ):
        index.saved_at = index.watermark
        return True
    return False


def save_text(folder: Path, owner: str, store_id: str, index: TextIndex) -> bool:
    """Write ``owner``'s BM25 index; on success ``index.saved_at`` becomes its watermark.
    ``False`` (nothing raised) when the folder cannot be written."""
    meta = {
        "store": store_id,
        "owner": owner,
        "watermark": index.watermark,
        "tokens": TOKENS_VERSION,
    }
    arrays: dict[str, Any] = {**index.to_arrays(), "meta": np.array(json.dumps(meta))}

    def write(tmp: Path) -> None:
        with tmp.open("wb") as fh:
            np.savez(fh, **arrays)

    if write_atomic(cache_file(folder, owner, TEXT_SUFFIX), write):
        index.saved_at = index.watermark
        return True
    return False


def write_atomic(file: Path, write: Callable[[Path], object]) -> bool:
    """Write ``file`` through a temporary file and a rename; ``False`` if that failed."""
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        private_dir(file.parent)
        write(tmp)
        os.chmod(tmp, FILE_MODE)  # owner-only, like the store (issue #33)
        os.replace(tmp, file)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False


def remove(folder: Path, owner: str) -> None:
    """Delete ``owner``'s saved caches (a missing file is fine; an undeletable one is left for
    the next save to overwrite)."""
    for suffix in (VECTOR_SUFFIX, ".json", TEXT_SUFFIX):
        with contextlib.suppress(OSError):
            cache_file(folder, owner, suffix).unlink(missing_ok=True)
