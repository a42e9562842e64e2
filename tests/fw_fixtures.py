"""The two fixtures every framework test module shares: the fake model server and a fresh
engine. Imported by name into each main-environment ``tests/test_fw_<name>.py`` (whose
conftest has an ``engine`` of its own, on both backends, that these modules must not get)
and by ``tests/fwenvs/conftest.py`` for the modules that run in a framework's own
environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fw_support import FakeModel, open_engine
from memlane import MemoryEngine


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModel]:
    """The fake OpenAI-compatible model server (tests/fw_support.py), one per test module."""
    with FakeModel() as served:
        yield served


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    """A fresh engine on a SQLite store in ``tmp_path`` (fw_support.open_engine)."""
    engine = open_engine(tmp_path)
    yield engine
    engine.close()
