"""``memlane migrate`` (a SQLite store into PostgreSQL) and ``memlane postgres start|stop|status``
(the packaged local server). See docs/postgres.md. psycopg and the packaged server are imported
inside the commands only (the ``postgres`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memlane.cli.app import (
    HomeOption,
    JsonOption,
    app,
    handle_errors,
    out,
    print_json,
    progress_bar,
)
from memlane.config import resolve_home
from memlane.errors import InvalidArgument

postgres_app = typer.Typer(
    name="postgres",
    help="A local PostgreSQL server (PostgreSQL 18 + pgvector, from the postgres extra) for "
    '[store] backend = "postgres" on one machine.',
    no_args_is_help=True,
)
app.add_typer(postgres_app, name="postgres")

DataOption = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help="The server's data folder. Default: <home>/postgres.",
        show_default=False,
    ),
]


def _data(data: Path | None, home: Path | None) -> Path:
    return (data or resolve_home(home) / "postgres").expanduser().resolve()


def _server() -> Any:
    """The packaged server's module (:mod:`memlane.store.postgres.server`).

    Raises:
        ConfigError: the ``postgres`` extra is not installed (:func:`memlane.store.postgres_extra`).
    """
    from memlane.store import postgres_extra

    with postgres_extra():
        from memlane.store.postgres import server
    return server


def _show(info: Any, state: str, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "state": state,
                "data": str(info.data) if info else None,
                "pid": info.pid if info else None,
                "port": info.port if info else None,
                "dsn": info.dsn if info else None,
            }
        )
        return
    if info is None:
        out.print(state)
        return
    out.print(f"{state}: pid {info.pid}, port {info.port}, data {info.data}", highlight=False)
    out.print(f"dsn: {info.dsn}", highlight=False)
    out.print(
        '\nIn memlane.toml:\n[store]\nbackend = "postgres"\n' + f'dsn = "{info.dsn}"',
        highlight=False,
    )


@postgres_app.command("start")
def start_command(
    data: DataOption = None,
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65535, help="TCP port (default: the last one, or free)."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start the packaged PostgreSQL server (initialising its folder on first use) on
    127.0.0.1 and print the DSN to put in memlane.toml. A running one is left as it is.

    Example: memlane postgres start --data ~/.memlane/postgres
    """
    with handle_errors():
        server = _server()
        folder = _data(data, home)
        was = server.status(folder)
        info = server.start(folder, port=port)
        _show(info, "already running" if was else "started", as_json)


@postgres_app.command("stop")
def stop_command(data: DataOption = None, home: HomeOption = None) -> None:
    """Stop the packaged server of the data folder (a clean shutdown).

    Example: memlane postgres stop
    """
    with handle_errors():
        stopped = _server().stop(_data(data, home))
        out.print("stopped" if stopped else "not running")


@postgres_app.command("status")
def status_command(
    data: DataOption = None, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    """Whether the packaged server of the data folder runs, and its DSN. Exit 0 when it runs, 1
    when not.

    Example: memlane postgres status --json
    """
    with handle_errors():
        info = _server().status(_data(data, home))
    _show(info, "running" if info else "not running", as_json)
    if info is None:
        raise typer.Exit(1)


@app.command("migrate")
def migrate_command(
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="The SQLite store to copy: sqlite:PATH (its memlane.db).",
            show_default=False,
        ),
    ],
    target: Annotated[
        str,
        typer.Option(
            "--to",
            help="The PostgreSQL database: postgresql://user@host:port/dbname.",
            show_default=False,
        ),
    ],
    batch: Annotated[int, typer.Option("--batch", min=1, help="Rows per transaction.")] = 1000,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would be copied; write nothing.")
    ] = False,
    index_memory: Annotated[
        str,
        typer.Option(
            "--index-memory",
            help="maintenance_work_mem while the HNSW and full-text indexes are built after "
            "the copy (a PostgreSQL size: 512MB, 4GB). The HNSW graph is built in memory when "
            "it fits: ~2GB for 1,000,000 memories of 384 dimensions.",
        ),
    ] = "1GB",
    as_json: JsonOption = False,
) -> None:
    """Copy a SQLite store into PostgreSQL: memories with embeddings, history, associations,
    the dedup log, sessions. In batches (resumed after an interruption: run it again), then
    verified (row counts, and a digest of ids, texts and content hashes). Into a new database
    the HNSW and full-text indexes are built once, after the memories (faster than row by row).
    Refuses a target that holds another embedding model or memories of another store.

    Example: memlane migrate --from sqlite:~/.memlane/memlane.db --to postgresql://me@db/memlane
    """
    with handle_errors():
        if not source.startswith("sqlite:"):
            raise InvalidArgument(f"--from must be sqlite:PATH, got {source!r}")
        if not target.startswith(("postgresql://", "postgres://")) and "=" not in target:
            raise InvalidArgument(f"--to must be a postgresql:// DSN, got {target!r}")
        path = Path(source.removeprefix("sqlite:")).expanduser().resolve()
        from memlane.store import postgres_extra

        with postgres_extra():
            from memlane.store.postgres import migrate
        if dry_run:
            plan = migrate.plan(path, target)
        else:
            with progress_bar(remaining=True) as bar:
                tasks: dict[str, Any] = {}

                def progress(table: str, done: int, total: int) -> None:
                    if table not in tasks:
                        tasks[table] = bar.add_task(table, total=total)
                    bar.update(tasks[table], completed=done)

                plan = migrate.copy(
                    path, target, batch=batch, progress=progress, index_memory=index_memory
                )
    report = plan.to_dict() | {"dry_run": dry_run}
    if as_json:
        print_json(report)
        return
    verb = "would copy" if dry_run else "copied"
    for table, counts in report["tables"].items():
        todo = counts["rows"] - counts["already"]
        n = todo if dry_run else counts["copied"]
        out.print(f"{table}: {counts['rows']} rows, {verb} {n}", highlight=False)
    if not dry_run:
        out.print(f"verified: {plan.source} -> {plan.target} ({plan.model})", highlight=False)
