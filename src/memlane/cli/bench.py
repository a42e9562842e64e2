"""CLI: ``memlane bench add|search|inject`` (:mod:`memlane.eval.bench`, docs/benchmarks.md)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from memlane.cli.app import (
    JsonOption,
    app,
    err,
    fail,
    handle_errors,
    out,
    print_json,
    progress_bar,
)
from memlane.cli.bench_backends import BackendOption, ClientsOption, DsnOption, LoadFromOption
from memlane.cli.bench_backends import run as run_backends

bench_app = typer.Typer(
    help="Benchmarks on seeded synthetic memories: write, search and injection latency.",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")

MemoriesOption = Annotated[
    int, typer.Option("--memories", "-n", min=1, help="Memories in the store (offered, seeded).")
]
SeedOption = Annotated[int, typer.Option("--seed", help="Generator seed (same seed, same texts).")]
BatchOption = Annotated[
    int, typer.Option("--batch", min=1, max=100_000, help="Memories per add_many call.")
]
QueriesOption = Annotated[
    int, typer.Option("--queries", min=1, help="Timed queries (after the untimed warm-up).")
]
WarmupOption = Annotated[
    int, typer.Option("--warmup", min=0, help="Untimed queries first (model load, caches).")
]
CacheOption = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Where built stores are kept for reuse, one per (model, N, seed). "
        "Default: $MEMLANE_BENCH_CACHE or ~/.cache/memlane/bench.",
    ),
]
RebuildOption = Annotated[
    bool, typer.Option("--rebuild", help="Build the store again even if a cached one exists.")
]
BenchHomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Home folder for the bench store (empty, or one a bench built). "
        "Default: a temporary folder (add) or the cache (search, inject).",
    ),
]


@contextmanager
def _progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr; yields ``update(done)``."""
    with progress_bar(transient=True, remaining=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=done)


@contextmanager
def _home_or_temp(home: Path | None) -> Iterator[Path]:
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        yield home
        return
    tmp = Path(tempfile.mkdtemp(prefix="memlane-bench-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _show(result: dict[str, Any], json_out: bool, rows: list[tuple[str, str]], note: str) -> None:
    """The result as JSON on stdout, or as a table of ``rows`` with ``note`` on stderr."""
    if json_out:
        print_json(result)
        return
    table = Table(
        title=f"bench {result['bench']}: {result['memories']:,} memories "
        f"({result['embedder']}, seed {result['seed']})",
        show_header=False,
        title_justify="left",
    )
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
    err.print(note)


def _decisions(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))


@bench_app.command("add")
def add_cmd(
    memories: MemoriesOption = 10_000,
    batch: BatchOption = 256,
    singles: Annotated[
        int, typer.Option("--singles", min=0, help="Timed single adds after the build.")
    ] = 200,
    seed: SeedOption = 0,
    home: BenchHomeOption = None,
    json_out: JsonOption = False,
    backend: BackendOption = None,
    clients: ClientsOption = "1,8",
    dsn: DsnOption = None,
    load_from: LoadFromOption = None,
) -> None:
    """Build a store of N memories with batched add_many (dedup on), then time single adds.

    Example: memlane bench add --memories 100000 --json
    (or --backend sqlite,postgres --clients 1,8: both backends in one run)
    """
    from memlane.eval import bench

    if load_from is not None and backend is None:
        raise fail("--load-from needs --backend (sqlite, postgres, or both)", 2)
    if backend is not None:
        return run_backends(
            "add",
            memories,
            backend,
            clients,
            seed=seed,
            batch=batch,
            calls=singles,
            warmup=5,
            dsn=dsn,
            json_out=json_out,
            load_from=load_from,
        )

    with handle_errors(), _home_or_temp(home) as where:
        if home is not None and any(p.name != "memlane.toml" for p in where.iterdir()):
            raise fail(f"{where} is not empty: bench add needs a new or empty --home")
        with _progress(memories, "adding") as update:
            result = bench.run_add(
                memories, home=where, seed=seed, batch=batch, singles=singles, progress=update
            )
    _show(
        result,
        json_out,
        [
            ("batched add, memories/s", f"{result['batch_per_second']:,.1f}"),
            ("build seconds", f"{result['build_seconds']:,.1f}"),
            ("embedding share of build", f"{result['embed_share']:.0%}"),
            ("decisions", _decisions(result["decisions"])),
            ("stored", f"{result['stored']:,}"),
            (f"single add p50 ms ({result['singles']})", f"{result['single_p50_ms']:.1f}"),
            ("single add p95 ms", f"{result['single_p95_ms']:.1f}"),
            ("single add max ms", f"{result['single_max_ms']:.1f}"),
            ("embedding share of single adds", f"{result['single_embed_share']:.0%}"),
        ],
        f"(first {result['single_warmup']} single adds not timed; medians and p95 of one run)",
    )


def _prepare(
    memories: int,
    seed: int,
    home: Path | None,
    cache_dir: Path | None,
    rebuild: bool,
    batch: int,
) -> Any:
    from memlane.eval import bench

    with _progress(memories, "building store") as update:
        prepared = bench.prepare_store(
            memories,
            seed,
            home=home,
            cache_dir=cache_dir,
            rebuild=rebuild,
            batch=batch,
            progress=update,
        )
    if prepared.reused:
        said = (
            f"store reused from the cache: {prepared.home} (built by an earlier run in "
            f"{prepared.build.seconds:,.1f} s; --rebuild builds it again)"
        )
    else:
        said = f"store built in {prepared.build.seconds:,.1f} s: {prepared.home}"
    err.print(said, highlight=False, markup=False)
    return prepared


def _latency_rows(result: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (f"p50 ms ({result['queries']} queries)", f"{result['p50_ms']:.1f}"),
        ("p95 ms", f"{result['p95_ms']:.1f}"),
        ("mean ms", f"{result['mean_ms']:.1f}"),
        ("max ms", f"{result['max_ms']:.1f}"),
        ("query embedding share", f"{result['embed_share']:.0%}"),
    ]


@bench_app.command("search")
def search_cmd(
    memories: MemoriesOption = 10_000,
    queries: QueriesOption = 200,
    warmup: WarmupOption = 20,
    seed: SeedOption = 0,
    batch: BatchOption = 256,
    home: BenchHomeOption = None,
    cache_dir: CacheOption = None,
    rebuild: RebuildOption = False,
    json_out: JsonOption = False,
) -> None:
    """Time hybrid searches (questions about stored facts, and unrelated ones) on N memories.

    The store of N memories is built once and cached (see --cache-dir). Example:
    memlane bench search --memories 100000 --json
    """
    from memlane.eval import bench

    with handle_errors():
        prepared = _prepare(memories, seed, home, cache_dir, rebuild, batch)
        result = bench.run_search(prepared, seed=seed, queries=queries, warmup=warmup)
    _show(
        result,
        json_out,
        [
            *_latency_rows(result),
            ("p50 ms, questions about a stored fact", f"{result['hit_p50_ms']:.1f}"),
            ("p50 ms, unrelated questions", f"{result['miss_p50_ms']:.1f}"),
            (f"stored fact in the top {result['limit']}", f"{result['recall_at_limit']:.0%}"),
            ("build seconds", f"{result['build_seconds']:,.1f}"),
        ],
        f"(warm-up of {warmup} queries, model and index load included, not timed)",
    )


@bench_app.command("inject")
def inject_cmd(
    memories: MemoriesOption = 10_000,
    queries: QueriesOption = 200,
    sessions: Annotated[
        int, typer.Option("--sessions", min=1, help="Sessions the turns are spread over.")
    ] = 8,
    warmup: WarmupOption = 20,
    seed: SeedOption = 0,
    batch: BatchOption = 256,
    home: BenchHomeOption = None,
    cache_dir: CacheOption = None,
    rebuild: RebuildOption = False,
    json_out: JsonOption = False,
    backend: BackendOption = None,
    clients: ClientsOption = "1,8",
    dsn: DsnOption = None,
    load_from: LoadFromOption = None,
) -> None:
    """Time injection turns (with the two previous turns as recent context) on N memories.

    The store of N memories is built once and cached (see --cache-dir). Example:
    memlane bench inject --memories 100000 --json
    (or --backend sqlite,postgres --clients 1,8: both backends in one run, searches too)
    """
    from memlane.eval import bench

    if load_from is not None and backend is None:
        raise fail("--load-from needs --backend (sqlite, postgres, or both)", 2)
    if backend is not None:
        return run_backends(
            "inject",
            memories,
            backend,
            clients,
            seed=seed,
            batch=batch,
            calls=queries,
            warmup=warmup,
            dsn=dsn,
            json_out=json_out,
            load_from=load_from,
        )

    with handle_errors():
        prepared = _prepare(memories, seed, home, cache_dir, rebuild, batch)
        result = bench.run_inject(
            prepared, seed=seed, queries=queries, sessions=sessions, warmup=warmup
        )
    _show(
        result,
        json_out,
        [
            *_latency_rows(result),
            ("items injected per turn", f"{result['items_per_turn']:.1f}"),
            ("skipped", _decisions(result["skipped"]) or "-"),
            ("build seconds", f"{result['build_seconds']:,.1f}"),
        ],
        f"(warm-up of {warmup} turns, model and index load included, not timed)",
    )


def serve_table(result: dict[str, Any], calls: int) -> Table:
    """``bench serve``'s figures, one column per level (in-process, then HTTP at each number
    of clients) and one row per figure: whole in an 80-column terminal for the default three
    levels (ten figures side by side cut every header to "inje..." there)."""
    table = Table(
        title=f"bench serve: {result['memories']:,} memories ({result['embedder']}), "
        f"{calls} calls per level, 70% inject / 20% search / 10% add, "
        f"{result['workers']} worker(s)",
        title_justify="left",
    )
    levels = [("in-process", result["in_process"])]
    levels += [("HTTP", lv) for lv in result["levels"]]
    table.add_column("figure", no_wrap=True)
    for where, lv in levels:
        n = lv["clients"]
        table.add_column(f"{where}\n{n} client{'s' if n != 1 else ''}", justify="right")

    def ms(lv: dict[str, Any], kind: str, key: str) -> str:
        return f"{lv.get(kind, {}).get(key, 0):.1f}"

    rows: list[tuple[str, Any]] = [
        ("calls/s", lambda lv: f"{lv['ops_per_s']:,.1f}"),
        ("errors", lambda lv: str(lv["errors"])),
        ("inject p50 ms", lambda lv: ms(lv, "inject", "p50_ms")),
        ("inject p95 ms", lambda lv: ms(lv, "inject", "p95_ms")),
        ("inject p99 ms", lambda lv: ms(lv, "inject", "p99_ms")),
        ("search p95 ms", lambda lv: ms(lv, "search", "p95_ms")),
        ("add p95 ms", lambda lv: ms(lv, "add", "p95_ms")),
        ("all calls p99 ms", lambda lv: ms(lv, "all", "p99_ms")),
        (
            "server CPU ms/call",
            lambda lv: (
                f"{lv['server_cpu_ms_per_call']:.1f}" if "server_cpu_ms_per_call" in lv else "-"
            ),
        ),
        (
            "server cores",
            lambda lv: f"{lv['server_cores']:.2f}" if "server_cores" in lv else "-",
        ),
    ]
    for name, cell in rows:
        table.add_row(name, *(cell(lv) for _, lv in levels))
    return table


@bench_app.command("serve")
def serve_cmd(
    memories: MemoriesOption = 10_000,
    calls: Annotated[
        int, typer.Option("--calls", min=1, help="Calls per level (and in-process).")
    ] = 400,
    clients: Annotated[
        str, typer.Option("--clients", help="Concurrent clients of each level, comma-separated.")
    ] = "1,8,32",
    warmup: WarmupOption = 20,
    seed: SeedOption = 0,
    batch: BatchOption = 256,
    home: BenchHomeOption = None,
    cache_dir: CacheOption = None,
    rebuild: RebuildOption = False,
    json_out: JsonOption = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1, help="memlane serve --workers (default: the server's default)."
        ),
    ] = None,
) -> None:
    """Load the HTTP server: 1, 8 and 32 clients, 70% inject / 20% search / 10% add, against
    the same calls in-process; then read every acknowledged write back.

    Runs on a copy of the cached store of N memories (the cache is not changed). Example:
    memlane bench serve --memories 10000 --json
    """
    from memlane.eval.bench.serve import run_serve

    try:
        levels = [int(c) for c in clients.split(",") if c.strip()]
    except ValueError:
        raise fail(f"--clients takes numbers separated by commas, got {clients!r}", 2) from None
    if not levels or min(levels) < 1 or max(levels) > 256:
        raise fail(f"--clients takes 1..256 clients per level, got {clients!r}", 2)
    with handle_errors():
        prepared = _prepare(memories, seed, home, cache_dir, rebuild, batch)
        result = run_serve(
            prepared, seed=seed, calls=calls, clients=levels, warmup=warmup, workers=workers
        )
    if json_out:
        print_json(result)
        return
    table = serve_table(result, calls)
    out.print(table)
    err.print(
        f"inject p95, HTTP at 1 client minus in-process: {result['inject_p95_gap_ms_at_1_client']} ms; "
        f"acknowledged writes {result['acknowledged_writes']}, lost {result['lost_writes']}"
    )
    rss = result["server_rss_mib"]
    if rss["parent"] is not None:
        err.print(
            f"server resident memory: parent {rss['parent']} MiB"
            + (
                f", workers {', '.join(f'{w} MiB' for w in rss['workers'])}"
                if rss["workers"]
                else ""
            )
        )
