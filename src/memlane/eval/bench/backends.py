"""``memlane bench add|inject --backend sqlite,postgres``: the same benchmark on each backend in one
run, with 1 and more concurrent clients (threads sharing one engine, as ``memlane serve``'s
worker threads do).

Per backend: a fresh store of N memories built with ``add_many`` (batches, dedup on; the same
seeded texts, embedded once before any build and untimed, so the build rate is the store's own),
then per client level:

- ``add``: single adds of the next memories of the stream, spread over the clients;
- ``inject``: injection turns (each with its session's two previous turns as ``recent``, each
  client its own sessions) and hybrid searches of the same texts.

With ``load_from`` (``--load-from HOME``: a SQLite store a bench built, such as ``memlane bench
janitor --home HOME``'s million), each backend's store is a copy of that one instead: SQLite's
files copied, PostgreSQL filled by ``memlane migrate`` (its indexes built once after the rows);
that time is reported apart as ``load_seconds``, N is the source's row count, and the embedder is
the source's own (its ``memlane.toml``). A million memories through the write path would take
~90 minutes on PostgreSQL here, and ~30 more to embed with the model.

PostgreSQL: the database of ``--dsn`` (it must be empty), else a packaged server started in a
temporary folder for the run (``memlane postgres``'s) and stopped after. Its report also holds
``EXPLAIN ANALYZE`` of the hot queries and the HNSW ``ef_search`` trade-off (recall@10 of the
vector leg against an exact scan, and its latency).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memlane.eval.bench.generator import Generator
from memlane.eval.bench.store import OWNER, build, open_engine, timed_embedder
from memlane.eval.timing import TimedEmbedder, latency_summary

BACKENDS = ("sqlite", "postgres")


class _Memo:
    """An embedder that remembers every text it embedded (the backends share the work)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: dict[str, NDArray[np.float32]] = {}
        #: Remember (building the stores) or not (timed calls: every backend pays the same).
        self.active = True

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if not self.active:
            return np.asarray(self.inner.embed_batch(texts), dtype=np.float32)
        todo = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if todo:
            for text, vec in zip(todo, self.inner.embed_batch(todo), strict=True):
                self.seen[text] = np.asarray(vec, dtype=np.float32)
        return np.vstack([self.seen[t] for t in texts])


def parse_list(text: str, allowed: Sequence[str] | None = None) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``; ``ValueError`` for an empty list or a name not allowed."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or (allowed is not None and any(i not in allowed for i in items)):
        raise ValueError(f"expected a comma-separated list of {', '.join(allowed or ['items'])}")
    return items


def _concurrently(clients: int, jobs: Sequence[Any], call: Callable[[Any], Any]) -> list[float]:
    """Run ``call`` on every job, ``clients`` threads taking their share in turn; the ms of
    each call."""
    ms: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)
    errors: list[BaseException] = []

    def worker(mine: Sequence[Any]) -> None:
        barrier.wait()
        try:
            for job in mine:
                started = time.perf_counter()
                call(job)
                took = (time.perf_counter() - started) * 1000.0
                with lock:
                    ms.append(took)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(jobs[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return ms


def _progress_of(
    progress: Callable[[str, int, int], None] | None, name: str, n: int
) -> Callable[[int], None] | None:
    if progress is None:
        return None
    report = progress
    return lambda done: report(name, done, n)


def _level(clients: int, ms: list[float], seconds: float) -> dict[str, Any]:
    return {
        "clients": clients,
        "calls": len(ms),
        "per_second": round(len(ms) / seconds, 2) if seconds else 0.0,
        **latency_summary(ms),
    }


def _store_home(
    root: Path, backend: str, dsn: str | None, stack: ExitStack, source: Path | None = None
) -> Path:
    """A home whose ``memlane.toml`` points at a fresh store of ``backend`` (with ``source``: a
    copy of that SQLite home's files for SQLite, its settings for PostgreSQL)."""
    home = root / backend
    settings = ""
    if source is not None:
        settings = (source / "memlane.toml").read_text(encoding="utf-8")
        if "[store]" in settings:
            raise ValueError(f"{source}/memlane.toml has a [store] table: load from a bench home")
    if backend == "sqlite":
        if source is not None:
            return home  # made by _load: a copy of the source's folder
        home.mkdir(parents=True)
        (home / "memlane.toml").write_text('[store]\nbackend = "sqlite"\n')
        return home
    home.mkdir(parents=True)
    if dsn is None:
        from memlane.store.postgres import server

        data = root / "pgdata"
        info = server.start(data)
        stack.callback(server.stop, data)
        dsn = info.dsn
    (home / "memlane.toml").write_text(
        f'{settings}\n[store]\nbackend = "postgres"\ndsn = "{dsn}"\n', encoding="utf-8"
    )
    return home


def _source_rows(source: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{source / 'memlane.db'}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
    finally:
        conn.close()


def _load(
    name: str,
    home: Path,
    source: Path,
    progress: Callable[[str, int, int], None] | None,
) -> float:
    """Fill ``home``'s store from ``source`` (module docstring); the seconds it took."""
    started = time.perf_counter()
    if name == "sqlite":
        shutil.copytree(source, home)
    else:
        from memlane.config import Settings
        from memlane.store.postgres import migrate

        dsn = Settings.load(home).store.dsn
        assert dsn is not None
        migrate.copy(
            source / "memlane.db",
            dsn,
            batch=5000,
            index_memory="4GB",
            progress=None if progress is None else lambda t, d, n: progress(f"{name} {t}", d, n),
        )
    return time.perf_counter() - started


def run_backends(
    kind: str,
    n: int,
    *,
    backends: Sequence[str] = BACKENDS,
    clients: Sequence[int] = (1, 8),
    seed: int = 0,
    batch: int = 256,
    calls: int = 200,
    warmup: int = 20,
    dsn: str | None = None,
    hnsw: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    load_from: Path | None = None,
) -> dict[str, Any]:
    """The comparison (module docstring) for ``kind`` ``"add"`` or ``"inject"``; a JSON-ready
    dict: ``{"bench", "memories", "embedder", "backends": {name: {build..., "levels": [...]}}}``.
    With ``load_from``, ``n`` is ignored (the source's row count is used)."""
    from memlane.config import Settings

    if load_from is not None:
        n = _source_rows(load_from)
    memo = _Memo(timed_embedder(Settings.load(load_from)).inner)
    timer = TimedEmbedder(memo)
    report: dict[str, Any] = {
        "bench": f"{kind} --backend",
        "memories": n,
        "seed": seed,
        "embedder": timer.name,
        "backends": {},
    }
    # Every text of the builds embedded up front, untimed: each backend's build then measures
    # the store alone (not the first one paying the model for both).
    texts = [] if load_from is not None else [m.content for m in Generator(seed).memories(n)]
    for start in range(0, len(texts), 256):
        memo.embed_batch(texts[start : start + 256])
    root = Path(tempfile.mkdtemp(prefix="memlane-bench-backends-"))
    try:
        with ExitStack() as stack:
            for name in backends:
                home = _store_home(root, name, dsn, stack, load_from)
                result: dict[str, Any] = {}
                if load_from is not None:
                    result["load_seconds"] = round(_load(name, home, load_from, progress), 3)
                    result["loaded_from"] = str(load_from)
                engine, _ = open_engine(home, timer)
                with engine:
                    if load_from is None:
                        memo.active = True
                        stats = build(
                            engine,
                            Generator(seed),
                            n,
                            batch=batch,
                            timer=timer,
                            progress=_progress_of(progress, name, n),
                        )
                        result["build_seconds"] = round(stats.seconds, 3)
                        result["add_per_second"] = (
                            round(n / stats.seconds, 2) if stats.seconds else 0.0
                        )
                        result["stored"] = stats.stored
                    else:
                        started = time.perf_counter()
                        engine.search("warm up: loads the indexes", owner=OWNER, limit=1)
                        result["open_seconds"] = round(time.perf_counter() - started, 3)
                        result["stored"] = engine.count(OWNER)
                    memo.active = False
                    result["levels"] = _levels(kind, engine, n, seed, clients, calls, warmup)
                    if name == "postgres":
                        from memlane.eval.bench.pg_plans import explain, hnsw_tradeoff

                        dsn = engine.settings.store.dsn  # the engine's own settings
                        assert dsn is not None
                        result["explain"] = explain(dsn, timer, OWNER)
                        if hnsw:
                            result["hnsw"] = hnsw_tradeoff(dsn, timer, n, seed)
                report["backends"][name] = result
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return report


def _levels(
    kind: str,
    engine: Any,
    n: int,
    seed: int,
    clients: Sequence[int],
    calls: int,
    warmup: int,
) -> list[dict[str, Any]]:
    gen = Generator(seed)
    out: list[dict[str, Any]] = []
    offset = n
    for level in clients:
        if kind == "add":
            extra = gen.memories(warmup + calls, offset)
            offset += warmup + calls

            def add(m: Any) -> Any:
                return engine.add(m.content, type=m.type, owner=OWNER, source="bench")

            for m in extra[:warmup]:
                add(m)
            started = time.perf_counter()
            ms = _concurrently(level, extra[warmup:], add)
            out.append({"kind": "add", **_level(level, ms, time.perf_counter() - started)})
            continue
        turns = gen.conversation(warmup + calls, n, sessions=8 * level, salt=f"inject-{level}")
        tag = f"bench-{level}-{time.time_ns()}"
        for t in turns[:warmup]:
            engine.inject(f"{tag}:warmup", t.text, owner=OWNER, recent=list(t.recent))
        jobs = turns[warmup:]

        def inject(t: Any, tag: str = tag) -> Any:
            return engine.inject(f"{tag}:{t.session}", t.text, owner=OWNER, recent=list(t.recent))

        started = time.perf_counter()
        ms = _concurrently(level, jobs, inject)
        out.append({"kind": "inject", **_level(level, ms, time.perf_counter() - started)})
        started = time.perf_counter()
        ms = _concurrently(level, jobs, lambda t: engine.search(t.text, owner=OWNER, limit=10))
        out.append({"kind": "search", **_level(level, ms, time.perf_counter() - started)})
    return out
