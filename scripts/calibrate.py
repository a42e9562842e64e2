"""Kept for old instructions: ``memlane dedup calibrate`` is the threshold sweep now (see
:mod:`memlane.eval.calibrate` and docs/dedup.md). This runs it with the same arguments
(``--json``, ``--auto-reject``, ``--cos-low``, ``--data``; ``--data`` defaults to
``../shared/data`` beside the repository, wherever it is run from).

Run from the repository root: ``PYTHONPATH=src .venv/bin/python scripts/calibrate.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memlane.cli import app  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if not any(a == "--data" or a.startswith("--data=") for a in args):
        args = ["--data", str(ROOT.parent / "shared" / "data"), *args]
    app(["dedup", "calibrate", *args], prog_name="memlane")
