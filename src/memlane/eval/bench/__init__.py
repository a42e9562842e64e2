"""Benchmarks on seeded synthetic memories: ``memlane bench add|search|inject``
(docs/benchmarks.md).

- :mod:`~memlane.eval.bench.words`, :mod:`~memlane.eval.bench.templates`: what memories are made of;
- :mod:`~memlane.eval.bench.generator`: the seeded stream of memories and queries;
- :mod:`~memlane.eval.bench.store`: building a store of N of them, and the cache of built stores;
- :mod:`~memlane.eval.bench.runs`: the three timed runs.
"""

from memlane.eval.bench.generator import (
    GENERATOR_VERSION,
    BenchQuery,
    Generator,
    SyntheticMemory,
    Turn,
)
from memlane.eval.bench.runs import run_add, run_inject, run_search
from memlane.eval.bench.store import (
    MARKER,
    OWNER,
    BuildStats,
    PreparedStore,
    build,
    default_cache_dir,
    open_engine,
    prepare_store,
    store_key,
    timed_embedder,
)
from memlane.eval.timing import TimedEmbedder, latency_summary, percentile

__all__ = [
    "GENERATOR_VERSION",
    "MARKER",
    "OWNER",
    "BenchQuery",
    "BuildStats",
    "Generator",
    "PreparedStore",
    "SyntheticMemory",
    "TimedEmbedder",
    "Turn",
    "build",
    "default_cache_dir",
    "latency_summary",
    "open_engine",
    "percentile",
    "prepare_store",
    "run_add",
    "run_inject",
    "run_search",
    "store_key",
    "timed_embedder",
]
