"""``memlane bench add|inject --backend sqlite,postgres``: the backend comparison
(:mod:`memlane.eval.bench.backends`), printed as one table per run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from memlane.cli.app import err, fail, handle_errors, out, print_json, progress_bar

BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="Compare backends in one run: sqlite,postgres (a fresh store of N memories on "
        "each; PostgreSQL: --dsn, or a packaged server for the run).",
    ),
]
ClientsOption = Annotated[
    str, typer.Option("--clients", help="With --backend: concurrent clients per level.")
]
DsnOption = Annotated[
    str | None,
    typer.Option("--dsn", help="With --backend: an empty PostgreSQL database to use."),
]
LoadFromOption = Annotated[
    Path | None,
    typer.Option(
        "--load-from",
        help="With --backend: copy this bench home's SQLite store (e.g. one `memlane bench "
        "janitor --home` built) into each backend instead of building N memories (SQLite: its "
        "files; PostgreSQL: memlane migrate). The copy's time is reported apart; its embedder "
        "and row count are used.",
        exists=True,
        file_okay=False,
    ),
]


def run(
    kind: str,
    memories: int,
    backend: str,
    clients: str,
    *,
    seed: int,
    batch: int,
    calls: int,
    warmup: int,
    dsn: str | None,
    json_out: bool,
    load_from: Path | None = None,
) -> None:
    """Run the comparison and print it (JSON, or a table)."""
    from memlane.eval.bench.backends import BACKENDS, parse_list, run_backends

    try:
        names = parse_list(backend, BACKENDS)
        levels = [int(c) for c in parse_list(clients)]
    except ValueError as exc:
        raise fail(f"--backend / --clients: {exc}", 2) from None
    with handle_errors(), progress_bar(transient=True, remaining=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(f"building ({name})", total=total)
            bar.update(tasks[name], completed=done)

        result = run_backends(
            kind,
            memories,
            backends=names,
            clients=levels,
            seed=seed,
            batch=batch,
            calls=calls,
            warmup=warmup,
            dsn=dsn,
            progress=progress,
            load_from=load_from,
        )
    if json_out:
        print_json(result)
        return
    table = Table(
        title=f"bench {kind}: {result['memories']:,} memories per backend ({result['embedder']})",
        title_justify="left",
    )
    build = "load s" if load_from is not None else "build add/s"
    for col in ("backend", build, "call", "clients", "calls/s", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    for name, r in result["backends"].items():
        for lv in r["levels"]:
            table.add_row(
                name,
                f"{r['load_seconds']:,.0f}"
                if load_from is not None
                else f"{r['add_per_second']:,.0f}",
                lv["kind"],
                str(lv["clients"]),
                f"{lv['per_second']:,.1f}",
                f"{lv['p50_ms']:.1f}",
                f"{lv['p95_ms']:.1f}",
            )
    out.print(table)
    pg = result["backends"].get("postgres", {})
    for row in pg.get("hnsw", []):
        out.print(
            f"hnsw.ef_search {row['ef_search']}: recall@10 {row['recall_at_10']:.3f}, "
            f"p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms",
            highlight=False,
        )
    err.print("(--json adds EXPLAIN ANALYZE of PostgreSQL's hot queries)")
