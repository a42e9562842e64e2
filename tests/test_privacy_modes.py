"""Owner-only files (issue #33, item 5): whatever the umask, a new home is 0700 and the store,
its WAL and SHM and the search index files 0600; ``memlane serve`` warns at start about files
that other local accounts can read, with the ``chmod`` that fixes them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import Backend
from memlane import HashEmbedder, MemoryEngine, Settings
from memlane.cli import app
from server_support import run_server


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The common default umask (files 0644, folders 0755), restored after."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("loose_umask")
def test_a_new_home_and_its_files_are_the_owners_only(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    engine = MemoryEngine.open(home, embedder=HashEmbedder())
    try:
        for n in range(30):
            engine.add(f"the kiwi cluster note {n}", owner="alice")
        engine.search("kiwi", owner="alice")
        store: Any = engine.store
        db = home / "memlane.db"
        wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
        assert wal.exists() and shm.exists()
        store.cache.save(0)  # the search indexes' files, as a close saves big ones
        vec = Path(f"{db}.vec")
        saved = [p for p in vec.rglob("*") if p.is_file()]
        assert saved, "the search indexes should have been saved"
        assert mode(home) == 0o700
        assert {p.name: mode(p) for p in (db, wal, shm, *saved)} == dict.fromkeys(
            [p.name for p in (db, wal, shm, *saved)], 0o600
        )
        assert mode(vec) == 0o700
    finally:
        engine.close()


@pytest.mark.usefixtures("loose_umask")
def test_a_home_a_hook_log_made_first_becomes_the_owners_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)  # what a hook's log (or a daemon's) makes first
    assert mode(home) == 0o755
    done = CliRunner().invoke(
        app,
        ["add", "the kiwi cluster runs in eu-west", "--home", str(home)],
        env={"MEMLANE_EMBEDDING__PROVIDER": "hash"},
    )
    assert done.exit_code == 0, done.output
    assert mode(home) == 0o700 and mode(home / "memlane.db") == 0o600


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_serve_warns_about_files_others_can_read(store_backend: Backend) -> None:
    home = store_backend.home
    engine = store_backend.engine(settings=Settings.load(home, **_store(store_backend)))
    engine.add("the kiwi cluster runs in eu-west", owner="alice")
    engine.close()
    store_backend.opened.clear()
    os.chmod(home, 0o755)
    os.chmod(home / "memlane.db", 0o644)
    with run_server(store_backend) as served:
        assert served.proc.poll() is None, served.log.read_text()
        log = served.log.read_text()
    assert f"warning: {home} is 0755" in log and f"chmod 700 {home}" in log, log
    assert f"{home / 'memlane.db'} is 0644" in log and f"chmod 600 {home / 'memlane.db'}" in log
    assert "other local accounts can read it" in log


def _store(backend: Backend) -> dict[str, object]:
    return {"store": backend.store_settings()}
