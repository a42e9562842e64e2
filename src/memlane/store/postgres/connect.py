"""Setting up the store's connections: the ``vector`` type as numpy arrays, the session
settings every connection needs."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from memlane.store.base import Vector


class _VectorLoader(Loader):
    """``vector`` (text form ``[1,2,3]``) straight to a float32 numpy array."""

    def load(self, data: Any) -> Vector:
        return np.array(bytes(data)[1:-1].split(b","), dtype=np.float32)


class _VectorBinaryLoader(Loader):
    """``vector`` (binary form: uint16 dimension, uint16 unused, big-endian float32s) straight
    to a float32 numpy array (pgvector's own loader builds a Python list first)."""

    format = Format.BINARY

    def load(self, data: Any) -> Vector:
        return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


def configure(conn: psycopg.Connection[Any], ef_search: int, lock_timeout_ms: int) -> None:
    """Set up a new connection: the ``vector`` type (numpy arrays in and out), UTC,
    ``lock_timeout`` (``[store] busy_timeout_ms``: how long a writer waits for another one's
    lock), ``hnsw.ef_search`` (``[store] hnsw_ef_search``: candidates kept while walking the
    graph; more = better recall, slower) and iterative index scans (pgvector 0.8: a filtered
    search goes on walking until it has ``LIMIT`` rows of the scope)."""
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise psycopg.ProgrammingError("the vector type is missing (CREATE EXTENSION vector)")
    register_vector_info(conn, info)
    conn.adapters.register_loader(info.oid, _VectorLoader)
    conn.adapters.register_loader(info.oid, _VectorBinaryLoader)
    conn.execute(
        f"SET TIME ZONE 'UTC'; SET lock_timeout = {int(lock_timeout_ms)}; "
        f"SET hnsw.ef_search = {int(ef_search)}; SET hnsw.iterative_scan = relaxed_order"
    )
