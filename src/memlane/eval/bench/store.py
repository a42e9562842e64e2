"""Building the benchmark's stores: the first N synthetic memories offered to the write path in
batches, and the cache of built stores (one folder per model, N, seed and generator version)
that ``bench search`` and ``bench inject`` reuse."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlane.eval.bench.generator import GENERATOR_VERSION, Generator
from memlane.eval.timing import TimedEmbedder

if TYPE_CHECKING:
    from memlane.config import Settings

#: Owner of every benchmark memory.
OWNER = "bench"


@dataclass(slots=True)
class BuildStats:
    """How a bench store was built: memories offered and stored, seconds (all, and embedding),
    write-path decision -> count. Saved in the store's ``bench.json`` marker (:meth:`to_dict`)."""

    memories: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    decisions: Counter[str] = field(default_factory=Counter)
    stored: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "memories": self.memories,
            "stored": self.stored,
            "build_seconds": round(self.seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "decisions": dict(sorted(self.decisions.items())),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildStats:
        return cls(
            memories=int(data["memories"]),
            seconds=float(data["build_seconds"]),
            embed_seconds=float(data.get("embed_seconds", 0.0)),
            decisions=Counter({str(k): int(v) for k, v in data.get("decisions", {}).items()}),
            stored=int(data.get("stored", 0)),
        )


def build(
    engine: Any,
    generator: Generator,
    n: int,
    *,
    batch: int = 256,
    timer: TimedEmbedder,
    progress: Callable[[int], None] | None = None,
) -> BuildStats:
    """Offer the first ``n`` memories of ``generator`` to ``engine.add_many`` in batches of
    ``batch`` (dedup on, as configured); ``timer`` is the engine's embedder. ``progress`` is
    called with the count done so far."""
    from memlane.engine import MemoryInput

    stats = BuildStats(memories=n)
    engine.embed(["warm-up: loads the model", "before the clock starts"])  # not timed
    engine.embed(["a single text"])
    embed_before = timer.seconds
    started = time.perf_counter()
    done = 0
    for start in range(0, n, batch):
        chunk = generator.memories(min(batch, n - start), start)
        items = [MemoryInput(m.content, m.type, OWNER, source="bench") for m in chunk]
        for result in engine.add_many(items):
            stats.decisions[result.decision.value] += 1
        done += len(chunk)
        if progress is not None:
            progress(done)
    stats.seconds = time.perf_counter() - started
    stats.embed_seconds = timer.seconds - embed_before
    stats.stored = int(engine.count(OWNER))
    return stats


def timed_embedder(settings: Settings) -> TimedEmbedder:
    """The embedder ``settings`` select, wrapped in a :class:`TimedEmbedder` (its model loads on
    first use, not here)."""
    from memlane.embeddings import embedder_from_settings

    emb = settings.embedding
    return TimedEmbedder(embedder_from_settings(emb))


def open_engine(home: Path, timer: TimedEmbedder | None = None) -> tuple[Any, TimedEmbedder]:
    """Open an engine on ``home`` embedding with ``timer``, else with the embedder its settings
    select wrapped in a :class:`TimedEmbedder`."""
    from memlane.config import Settings
    from memlane.engine import MemoryEngine

    settings = Settings.load(home)
    timer = timer if timer is not None else timed_embedder(settings)
    return MemoryEngine.open(home, settings, embedder=timer), timer


def default_cache_dir() -> Path:
    """``$MEMLANE_BENCH_CACHE``, else ``$XDG_CACHE_HOME/memlane/bench``, else
    ``~/.cache/memlane/bench``."""
    explicit = os.environ.get("MEMLANE_BENCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "memlane" / "bench"


MARKER = "bench.json"


def store_key(embedder_name: str, n: int, seed: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9.-]+", "_", embedder_name)
    return f"{safe}-n{n}-seed{seed}-g{GENERATOR_VERSION}"


@dataclass(slots=True)
class PreparedStore:
    """A home holding a bench store, how it was built, and the embedder to time runs with (the
    one that built it, its model already loaded then)."""

    home: Path
    build: BuildStats
    reused: bool
    embedder: TimedEmbedder


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl  # here, not at the top: POSIX only, and only needed to prepare a store

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def prepare_store(
    n: int,
    seed: int,
    *,
    home: Path | None,
    cache_dir: Path | None,
    rebuild: bool = False,
    batch: int = 256,
    progress: Callable[[int], None] | None = None,
) -> PreparedStore:
    """A home holding the bench store of ``n`` memories for ``seed``: reused when already built
    (a ``bench.json`` marker with the same key), else built. With ``home`` the store lives there;
    otherwise under ``cache_dir`` (default :func:`default_cache_dir`), one folder per key.

    Raises:
        InvalidArgument: ``home`` holds a store that is not this benchmark's.
    """
    from memlane.config import CONFIG_FILENAME, Settings
    from memlane.errors import InvalidArgument

    in_cache = home is None
    if home is None:
        # The cache's stores use the default settings (and MEMLANE_* variables), never a home's.
        timer = timed_embedder(Settings.load(Path(tempfile.gettempdir()) / "memlane-bench-none"))
        home = (cache_dir or default_cache_dir()) / store_key(timer.name, n, seed)
    else:
        timer = timed_embedder(Settings.load(home))
    key = store_key(timer.name, n, seed)
    marker = home / MARKER
    lock = home / ".bench.lock"
    keep = (lock.name, CONFIG_FILENAME)
    if (
        not in_cache
        and home.is_dir()
        and not marker.is_file()
        and any(child.name not in keep for child in home.iterdir())
    ):
        raise InvalidArgument(
            f"{home} is not empty and holds no bench store; give an empty or new folder as --home"
        )
    home.mkdir(parents=True, exist_ok=True)
    with _locked(lock):
        if marker.is_file() and not rebuild:
            data = json.loads(marker.read_text())
            if data.get("key") != key:
                raise InvalidArgument(
                    f"{home} holds the bench store {data.get('key')!r}, not {key!r}: "
                    "use another --home, or --rebuild to replace it"
                )
            return PreparedStore(home, BuildStats.from_dict(data["build"]), True, timer)
        for child in home.iterdir():  # our own store (stale, or --rebuild): start afresh
            if child.name in keep:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        engine, _ = open_engine(home, timer)
        with engine:
            stats = build(engine, Generator(seed), n, batch=batch, timer=timer, progress=progress)
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "seed": seed, "build": stats.to_dict()}, indent=2))
        os.replace(tmp, marker)
        return PreparedStore(home, stats, False, timer)
