"""``memlane janitor``: find duplicate clusters among stored memories and merge each into one."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from memlane.cli.app import HomeOption, JsonOption, app, err, out, print_json, progress_bar
from memlane.cli.render import command, engine_for, key_value_grid, table


@command(app, "janitor")
def janitor(
    owner: Annotated[
        str | None,
        typer.Option("--owner", help="Only this owner's memories (default: every owner, apart)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; write nothing.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Merge duplicate clusters that slipped past the write path (never across owners).

    Candidates come from each memory's nearest neighbours and from shared rare words, never
    from all pairs; each cluster is merged once, by the configured LLM or, without one, only
    when every pair of its members passes the near-identical guard (the newest text holding
    every member's words wins). Every member's text stays in the survivor's history; members
    become superseded. A progress bar runs on stderr; the report (and with --dry-run the plan)
    goes to stdout.

    Examples:  memlane janitor --dry-run   |   memlane janitor --owner alice --json
    """
    with engine_for(home) as engine, progress_bar(transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total)
            bar.update(tasks[label], completed=done, total=total)

        report = engine.janitor(owner=owner, dry_run=dry_run, progress=progress)
    data = report.to_dict()
    if as_json:
        print_json(data)
        return
    shown = [p for p in report.plans if p.action == "merge" or dry_run]
    if shown:
        t = table("plan (dry run: nothing written)" if dry_run else "clusters merged")
        for col in ("outcome", "via", "members", "text that stays"):
            t.add_column(col)
        for p in shown:
            members = Text()
            for m in p.members:
                members.append(("* " if m.id == p.survivor else "- ") + m.content + "\n")
            t.add_row(p.outcome, p.via or "-", members, p.text or p.reason)
        out.print(t)
    skipped = ", ".join(f"{k} {v}" for k, v in data["skipped"].items()) or "none"
    out.print(
        key_value_grid(
            [
                ("memories", f"{report.memories:,}"),
                (
                    "candidate pairs",
                    f"{report.candidate_pairs:,} ({data['candidate_pairs_per_memory']} per memory)",
                ),
                ("pairs at or above gray_low", f"{report.pairs:,}"),
                ("clusters", f"{report.clusters:,}"),
                ("merged" if not dry_run else "would merge", _merged(report, dry_run)),
                ("skipped", skipped),
                ("LLM calls", f"{report.llm_calls} ({report.llm_failures} failed)"),
                ("seconds", f"{report.seconds:.2f} ({_phases(report.phase_seconds)})"),
            ]
        )
    )
    if dry_run:
        err.print("dry run: nothing was written")


def _phases(seconds: dict[str, float]) -> str:
    return ", ".join(f"{phase} {s:.2f}" for phase, s in seconds.items()) or "no owner"


def _merged(report: Any, dry_run: bool) -> str:
    if dry_run:
        absorbed = sum(len(p.absorbed) for p in report.plans if p.outcome == "planned")
        return f"{report.planned} clusters ({absorbed} memories)"
    return f"{report.merged} clusters ({report.absorbed} memories superseded)"
