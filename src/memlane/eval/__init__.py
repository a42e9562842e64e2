"""Evaluation of memlane, kept out of the runtime: benchmarks (:mod:`memlane.eval.bench`), the
LoCoMo replay (:mod:`memlane.eval.replay`), the labelled-pair evaluation of the write path
(:mod:`memlane.eval.pairs`) and the threshold sweep (:mod:`memlane.eval.calibrate`).

Nothing under ``memlane`` imports this package at import time: only the CLI commands ``memlane
bench``, ``memlane replay`` and ``memlane dedup pairs|calibrate`` do, inside the command
functions (``tests/test_imports.py`` checks it). This file imports nothing.
"""
