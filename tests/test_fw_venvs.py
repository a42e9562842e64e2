"""The frameworks that cannot share the main environment, each tested in its own.

For every ``tests/fwenvs/test_fw_<name>.py`` this runs that module with the Python of
``.fwenvs/<name>/`` (made by ``make fwenvs``, which ``make test`` runs first) and fails with the
inner run's output when a test there fails. The module is the single list: the Makefile's
``FW_ENVS`` is derived from the same file names.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FWENV_TESTS = sorted((REPO / "tests" / "fwenvs").glob("test_fw_*.py"))


@pytest.mark.parametrize("module", FWENV_TESTS, ids=lambda p: p.stem.removeprefix("test_fw_"))
def test_framework_in_its_own_environment(module: Path) -> None:
    name = module.stem.removeprefix("test_fw_")
    python = REPO / ".fwenvs" / name / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"{python.relative_to(REPO)} is missing: run `make fwenvs` (it builds one virtual "
            f"environment per framework under .fwenvs/; `make test` does it first)"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "PYTEST_"))}
    env.pop("PYTHONPATH", None)  # the framework environment's editable install finds src/
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--confcutdir",
            str(module.parent),
            str(module),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        pytest.fail(
            f"{module.name} in .fwenvs/{name} exited {done.returncode}:\n"
            f"{done.stdout[-8000:]}\n{done.stderr[-4000:]}"
        )
    assert " passed" in done.stdout, done.stdout  # a module that collected nothing is a failure
