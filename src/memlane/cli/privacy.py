"""CLI: ``memlane purge --owner X --yes`` (real deletion of everything of one owner),
``memlane export`` (docs/security.md). ``memlane forget --purge ID`` deletes one memory the same
way; ``memlane import`` of an export restores it (:func:`restore_export`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.app import HomeOption, JsonOption, app, fail, out, print_error, print_json
from memlane.cli.render import command, engine_for
from memlane.transfer import export_lines, import_lines


@command(app, "export")
def export(
    owner: Annotated[
        str | None, typer.Option("--owner", help="Only this owner (default: every owner).")
    ] = None,
    home: HomeOption = None,
) -> None:
    """Write every memory (with its status, timestamps and history) as JSON Lines on stdout:
    the memlane-export format, version 1 (docs/security.md). `memlane import FILE` restores it.

    Example:  memlane export --owner alice > alice.jsonl
    """
    with engine_for(home) as engine:
        for line in export_lines(engine, owner):
            sys.stdout.write(line + "\n")


def restore_export(raw_lines: list[bytes], home: Path | None, as_json: bool) -> None:
    """``memlane import`` of an export: restore its memories as they were, all or nothing;
    exit 1 when a line was bad (each named with its line number; nothing restored)."""
    with engine_for(home, create=True) as engine:  # a write: an empty home is made
        report = import_lines(engine, raw_lines)
    if as_json:
        print_json(
            {"restored": report.restored, "skipped": report.skipped, "errors": report.errors}
        )
    elif not report.errors:
        out.print(
            f"restored {report.restored:,} memories ({report.skipped:,} already there, skipped)"
        )
    for e in [] if as_json else report.errors:
        print_error(f"line {e['line']}: {e['error']}")
    if report.errors:
        if not as_json:
            print_error(
                f"nothing restored: {len(report.errors):,} bad lines; fix them and import the "
                "file again"
            )
        raise typer.Exit(1)


@command(app, "purge")
def purge(
    owner: Annotated[str, typer.Option("--owner", help="The owner whose memories go.")],
    yes: Annotated[
        bool, typer.Option("--yes", help="Really delete: nothing can bring it back.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete everything of one owner for real: memories, their history, the dedup log,
    associations, sessions and the search indexes; SQLite overwrites the freed pages
    (secure_delete) and empties its WAL; PostgreSQL needs VACUUM FULL to rewrite its files
    (docs/security.md). Without --yes nothing is deleted (exit 2).

    Example:  memlane purge --owner alice --yes
    """
    if not yes:
        raise fail(f"purge deletes every memory of owner {owner!r} for good: add --yes to do it", 2)
    with engine_for(home) as engine:
        deleted = engine.purge(None, owner=owner)
        backend = engine.settings.store.backend
    if as_json:
        print_json({"owner": owner, "purged": deleted})
        return
    out.print(f"purged {deleted:,} memories of {owner!r} and every row holding their text")
    if backend == "postgres":
        out.print(
            "PostgreSQL keeps old row versions until VACUUM: run VACUUM FULL memories, "
            "memory_history, dedup_log to rewrite the files (docs/security.md)"
        )
