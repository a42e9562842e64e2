"""``memlane review``: list the unreviewed dedup decisions, confirm or reverse one, or let the LLM
review the rejections that embeddings made alone."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.text import Text

from memlane.cli.app import (
    HomeOption,
    JsonOption,
    OwnerOption,
    app,
    err,
    out,
    print_json,
    progress_bar,
)
from memlane.cli.render import command, decision_text, engine_for, short, table
from memlane.engine import MemoryEngine

review_app = typer.Typer(
    help="Review the dedup log: list unreviewed decisions, confirm or reverse one, or --llm.",
    invoke_without_command=True,
)
app.add_typer(review_app, name="review")

EntryArg = Annotated[int, typer.Argument(help="The dedup-log entry id (see `memlane review`).")]


def _print_outcomes(outcomes: Sequence[Any], as_json: bool) -> None:
    if as_json:
        print_json([o.to_dict() for o in outcomes])
        return
    for o in outcomes:
        out.print(
            f"[bold]{o.action}[/bold] {o.message}" + (f" ({o.reasoning})" if o.reasoning else ""),
            highlight=False,
        )


@review_app.callback()
def review(
    ctx: typer.Context,
    owner: OwnerOption = None,
    llm: Annotated[
        bool,
        typer.Option(
            "--llm",
            help="Ask the configured LLM about the rejections decided without one "
            "(auto_reject, replaced, fallback_reject, janitor merges): confirm or reverse each.",
        ),
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Rows at most.")] = 100,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the unreviewed dedup decisions (hash_exact ones are confirmed automatically).

    Examples:  memlane review   |   memlane review confirm 12   |   memlane review reverse 12
    |   memlane review --llm
    """
    if ctx.invoked_subcommand is not None:
        return
    with engine_for(home) as engine:
        if llm:
            with progress_bar(transient=True) as bar:
                task = bar.add_task("asking the LLM", total=None)
                outcomes = engine.review_with_llm(
                    owner=owner,
                    limit=limit,
                    progress=lambda d, t: bar.update(task, completed=d, total=t),
                )
            _print_outcomes(outcomes, as_json)
            if not as_json:
                err.print(f"{len(outcomes)} rows reviewed by the LLM", highlight=False)
            return
        given = owner is not None
        rows = engine.review_pending(owner=owner, limit=limit)
        owner = engine.owner_of(owner)
        others = {} if rows or given or as_json else _pending_elsewhere(engine, owner, limit)
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    if not rows:
        out.print(_nothing_for(owner, given, others), highlight=False, markup=False)
        return
    t = table(f"{len(rows)} unreviewed dedup decisions of {owner!r}")
    for col in ("id", "decision", "sim", "offered text", "kept memory"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r.id),
            decision_text(r.decision),
            short(r.similarity, 3),
            Text(r.new_text),  # plain text: "[redacted:password]" is no markup (#33)
            Text(r.existing_text or ""),
        )
    out.print(t)
    if rows:
        err.print(
            "confirm or reverse one:  memlane review confirm ID  |  memlane review reverse ID"
        )


#: Owners :func:`_pending_elsewhere` looks at, at most (those with the most memories first).
OWNERS_LOOKED_AT = 20


def _pending_elsewhere(engine: MemoryEngine, owner: str, limit: int) -> dict[str, int]:
    """Unreviewed decisions per other owner (of the :data:`OWNERS_LOOKED_AT` owners with the
    most memories), for a ``memlane review`` without ``--owner`` that found none of its own."""
    sizes: dict[str, int] = {}
    for who, _type, _status, n in engine.counts():
        if who != owner:
            sizes[who] = sizes.get(who, 0) + n
    biggest = sorted(sizes, key=lambda who: (-sizes[who], who))[:OWNERS_LOOKED_AT]
    found = {who: len(engine.review_pending(owner=who, limit=limit)) for who in biggest}
    return {who: n for who, n in found.items() if n}


def _nothing_for(owner: str, given: bool, others: dict[str, int]) -> str:
    """What ``memlane review`` says when ``owner`` has nothing to review: which owners have
    decisions and how to pick one (``--owner``) when the owner was not chosen."""
    line = f"no unreviewed dedup decisions of {owner!r}"
    if given:
        return line
    line += " (the owner without --owner: [scope] owner in memlane.toml, else default)"
    if not others:
        return line + "; no other owner has any either"
    listed = ", ".join(f"{who} ({n})" for who, n in sorted(others.items(), key=lambda kv: -kv[1]))
    first = max(others, key=lambda who: others[who])
    return (
        f"{line}; unreviewed decisions of other owners: {listed}. Pick one with --owner: "
        f"memlane review --owner {shlex.quote(first)}"
    )


@command(review_app, "confirm")
def confirm(
    entry_id: EntryArg,
    owner: OwnerOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Confirm a decision: it stands.

    Errors: an entry id not in the owner's dedup log (exit code 4)."""
    with engine_for(home) as engine:
        _print_outcomes([engine.review(entry_id, "confirm", owner=owner)], as_json)


@command(review_app, "reverse")
def reverse(
    entry_id: EntryArg,
    owner: OwnerOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reverse a decision: the text it took out of the store becomes a memory again (of a
    `replaced` decision the older text; a merge splits back), kept apart from the memory it was
    matched with for good. Exits 1 when a live memory already holds that text (nothing written).

    Errors: an entry id not in the owner's dedup log (exit code 4)."""
    with engine_for(home) as engine:
        outcome = engine.review(entry_id, "reverse", owner=owner)
    _print_outcomes([outcome], as_json)
    if outcome.action == "conflict":  # nothing changed: a script must be able to tell
        err.print(f"error: entry {entry_id} not reversed: {outcome.message}", highlight=False)
        raise typer.Exit(1)
