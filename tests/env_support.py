"""The one environment rule every test runs under, shared by tests/conftest.py and
tests/fwenvs/conftest.py (the frameworks' own environments load only the latter)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def isolate_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads the developer's ~/.memlane or their MEMLANE_* variables: every MEMLANE_*
    variable is removed and MEMLANE_HOME points at a fresh folder, which is returned."""
    for key in list(os.environ):
        if key.startswith("MEMLANE_"):
            monkeypatch.delenv(key)
    home = tmp_path_factory.mktemp("env-home")
    monkeypatch.setenv("MEMLANE_HOME", str(home))
    return home
