"""CLI: ``memlane bench janitor`` (:mod:`memlane.eval.bench.janitor`, docs/dedup.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.app import JsonOption, fail, handle_errors
from memlane.cli.bench import (
    BenchHomeOption,
    MemoriesOption,
    SeedOption,
    _home_or_temp,
    _progress,
    _show,
    bench_app,
)


@bench_app.command("janitor")
def janitor_cmd(
    memories: MemoriesOption = 100_000,
    near_repeats: Annotated[
        float,
        typer.Option(
            "--near-repeats", min=0.0, max=0.9, help="Share of the stream repeating a memory."
        ),
    ] = 0.1,
    seed: SeedOption = 0,
    home: BenchHomeOption = None,
    json_out: JsonOption = False,
) -> None:
    """Time the janitor on N synthetic memories with duplicates that slipped past the write path.

    The store is built without dedup (hash embedder), its indexes saved; then `memlane janitor
    --json` runs twice in a child process (time, candidate pairs per memory, peak memory; the
    second run must merge nothing). With [llm] configured (MEMLANE_LLM__*), that model is asked
    and its calls per 1,000 memories reported. Example: memlane bench janitor --memories 100000
    """
    from memlane.eval.bench.janitor import run_janitor

    with handle_errors(), _home_or_temp(home) as where:
        if home is not None and any(where.iterdir()):
            raise fail(f"{where} is not empty: bench janitor needs a new or empty --home")
        with _progress(memories, "building store") as update:
            result = run_janitor(
                memories, home=Path(where), seed=seed, near_repeats=near_repeats, progress=update
            )
    second = result["second_run"]
    _show(
        result,
        json_out,
        [
            ("janitor seconds (in the run)", f"{result['seconds']:,.2f}"),
            (
                "  candidates / clusters / merges",
                " / ".join(f"{s:,.1f}" for s in result["phase_seconds"].values()),
            ),
            ("process seconds (start, index load)", f"{result['process_seconds']:,.2f}"),
            ("process CPU seconds (user + system)", f"{result['process_cpu_seconds']:,.2f}"),
            (
                "load average at the end (other jobs)",
                f"{result['load_average_1min']} on {result['cpus']} CPUs",
            ),
            ("candidate pairs per memory", f"{result['candidate_pairs_per_memory']:.2f}"),
            ("pairs at or above gray_low", f"{result['pairs']:,}"),
            ("clusters", f"{result['clusters']:,}"),
            ("merged (memories superseded)", f"{result['merged']:,} ({result['absorbed']:,})"),
            ("skipped", ", ".join(f"{k} {v}" for k, v in result["skipped"].items()) or "-"),
            ("peak memory MB (child RSS)", f"{result['peak_rss_mb']:,.1f}"),
            ("LLM calls per 1,000 memories", f"{result['llm_calls_per_1000']:.2f}"),
            (
                "calls per 1,000 a model would get",
                f"{result['llm_calls_if_configured_per_1000']:.2f}",
            ),
            ("second run: merged", f"{second['merged']} ({second['seconds']:.2f} s)"),
            ("build seconds (not timed)", f"{result['build_seconds']:,.1f}"),
        ],
        "(one run; the janitor's time includes loading the saved indexes)",
    )
