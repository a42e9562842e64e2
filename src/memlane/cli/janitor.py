"""``memlane janitor``: find duplicate clusters among stored memories and merge each into one."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from memlane.cli.app import HomeOption, JsonOption, app, err, out, print_json, progress_bar
from memlane.cli.render import command, engine_for, key_value_grid, table
from memlane.dedup.words import stem


@command(app, "janitor")
def janitor(
    owner: Annotated[
        str | None,
        typer.Option("--owner", help="Only this owner's memories (default: every owner, apart)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; write nothing.")
    ] = False,
    skipped: Annotated[
        bool,
        typer.Option(
            "--skipped", help="Also list the clusters not merged, each with its reason in words."
        ),
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
    goes to stdout: the merges first, one row each (similarity, via, every member's text with
    its full id below it, * for the one that stays), then the clusters not merged, counted by
    reason (listed with --skipped).

    Errors: a home that does not exist (exit code 4; nothing is created).

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
    merges = [p for p in report.plans if p.action == "merge"]
    if merges:
        out.print(_plan_table(merges, "would merge (dry run)" if dry_run else "merged"))
    others = [p for p in report.plans if p.action != "merge"]
    if others and skipped:
        out.print(_plan_table(others, "not merged"))
    elif others:
        err.print(f"{len(others)} clusters not merged (--skipped lists them with the reason)")
    not_merged = ", ".join(f"{k} {v}" for k, v in data["skipped"].items()) or "none"
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
                ("not merged", not_merged),
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


def _plan_table(plans: list[Any], title: str) -> Table:
    """One row per cluster: similarity, via (merges) or the reason (the others), the members'
    texts with their full ids (``*`` the one that stays), and the text that stays."""
    merging = plans[0].action == "merge"
    t = table(title)
    t.add_column("sim", justify="right", no_wrap=True)
    t.add_column("via" if merging else "why not", max_width=None if merging else 34)
    t.add_column("members (id below each; * stays)", min_width=38)
    if merging:
        t.add_column("text that stays")
    for p in plans:
        members = Text()
        for i, m in enumerate(p.members):
            members.append(("* " if m.id == p.survivor else "- ") + m.content)
            members.append(f"\n  {m.id}" + ("\n" if i < len(p.members) - 1 else ""), style="dim")
        texts = [m.content for m in p.members]
        # memory text as plain Text, never rich markup ("[redacted:password]" stays; #33)
        why = Text(p.via or "-" if merging else _why(p, texts))
        row: list[Any] = [f"{p.similarity:.3f}", why, members]
        if merging:
            row.append(Text(p.text or ""))
        t.add_row(*row)
    return t


def _why(plan: Any, texts: list[str]) -> str:
    """Why a cluster was not merged, in words: the outcome's meaning, then the guard's reason
    with its word stems given back as the members wrote them ("morn" -> "mornings")."""
    meaning = WHY_NOT.get(plan.outcome, plan.outcome)
    reason = plan.reason
    # the guard's reason names each pair by its ids; the texts are beside it already
    if " fail " in reason:
        reason = reason.split(" fail ", 1)[1].removeprefix("the near-identical guard").strip()
        reason = reason.removeprefix("(").removesuffix(")")
    return f"{meaning}: {as_written(reason, texts)}" if reason else meaning


#: A skipped cluster's outcome in words (ClusterPlan.outcome).
WHY_NOT = {
    "guard": "refused by the near-identical guard",
    "llm_keep": "the LLM kept them apart",
    "too_large": "cluster too large to merge safely",
    "changed": "a member changed since the plan",
}


def as_written(reason: str, texts: list[str]) -> str:
    """``reason`` with each word that is a stem of a word in ``texts`` replaced by that word as
    written (the guard compares stems: "use" for "uses"); other words are kept."""
    written: dict[str, str] = {}
    for text in texts:
        for word in re.findall(r"[A-Za-z][A-Za-z'-]*", text):
            written.setdefault(stem(word.lower()), word)
            written.setdefault(word.lower(), word)
    spelled = {w.lower() for text in texts for w in re.findall(r"[A-Za-z][A-Za-z'-]*", text)}

    def back(match: re.Match[str]) -> str:
        word = match.group(0)
        if word.lower() in spelled:
            return word
        return written.get(word.lower(), word)

    return re.sub(r"[A-Za-z][A-Za-z'-]*", back, reason)
