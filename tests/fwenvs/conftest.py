"""conftest for the framework tests that run in a framework's own virtual environment.

Some agent frameworks pin versions that cannot live beside the rest of memlane's extras in one
environment (AutoGen pins protobuf~=5.29 while onnx needs >=6.31; CrewAI pins openai<3 and
rich<15; Google ADK 2.x and Strands pin opentelemetry). Each of them gets ``.fwenvs/<name>/``
(``make fwenvs``: memlane editable with the extra ``<name>`` plus pytest), and its test module
``tests/fwenvs/test_fw_<name>.py`` runs there, started by ``tests/test_fw_venvs.py`` from the
main suite. Only this conftest is loaded there (``--confcutdir``): the main one needs the
main environment's extras.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# fw_support (the fake OpenAI-compatible model and the scenario checks) lives one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from env_support import isolate_env
from fw_fixtures import engine, model  # noqa: F401  (shared with the main-env modules)


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """No test reads the developer's ~/.memlane or their MEMLANE_* variables."""
    return isolate_env(tmp_path_factory, monkeypatch)
