"""The OpenAPI document tells the truth (issue #24): schemathesis (a dev dependency) runs every
phase (examples, coverage, fuzzing, stateful) with every check against a real ``memlane serve``
started here, with a fixed seed and a bounded number of examples (about a minute on a quiet
machine), and finds no failure.

Configuration, each line a statement about the API (``schemathesis.toml`` written below):

- ``allow-x00 = false``: no text may hold NUL (422: PostgreSQL cannot store it), which a JSON
  schema cannot say of an object's keys;
- ``/v1/learn`` and ``/v1/dedup-log/review-llm`` answer 422 naming ``llm.provider`` on a
  server without an LLM (this one): that is their valid answer here;
- confirming or reversing a dedup log row already reviewed (or with nothing to restore) is 422
  naming why: the row's state, not the request's shape;
- a schema-violating body can be refused as too large (413: a list over its maxItems is also
  over ``max_body_bytes``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Backend
from server_support import run_server

pytest.importorskip("schemathesis")

CONFIG = """
seed = 24
workers = 1
[generation]
max-examples = 6
allow-x00 = false
deterministic = true
[phases]
enabled = true
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428"]
[[operations]]
include-path-regex = "^/v1/(learn|dedup-log/review-llm)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "422"]
[[operations]]
include-path-regex = "^/v1/dedup-log/[^/]+/(confirm|reverse)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "422"]
"""


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_schemathesis_finds_no_failure(store_backend: Backend, tmp_path: Path) -> None:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis' st is not installed (make install)"
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    with run_server(store_backend) as served:
        run = subprocess.run(
            [
                st,
                "--config-file",
                str(config),
                "run",
                f"{served.url}/openapi.json",
                "--checks",
                "all",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
    summary = run.stdout[run.stdout.rfind("SUMMARY") :]
    print(summary)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "0 unique failures" in summary or "failures" not in summary.split("Test cases")[-1]
