"""CLI commands that read for a model turn: ``search`` and ``inject``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from memlane.cli.app import (
    AgentOption,
    HomeOption,
    JsonOption,
    OwnerOption,
    ProjectOption,
    app,
    err,
    out,
    print_json,
)
from memlane.cli.inject_explain import explain_rows, explain_table
from memlane.cli.render import (
    command,
    engine_for,
    memory_cell,
    project_for,
    table,
)
from memlane.explain import SKIP_WORDS
from memlane.injection.cut import explaining
from memlane.types import Injection, MemoryType

TYPE_NAMES = ", ".join(t.value for t in MemoryType)


# --------------------------------------------------------------------------------- search


@command(app, "search")
def search(
    query: Annotated[
        str, typer.Argument(help="What to look for (plain text).", show_default=False)
    ],
    owner: OwnerOption = None,
    agent: AgentOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many hits.")] = 10,
    mode: Annotated[
        str, typer.Option("--mode", help="hybrid (default), vector or fts (one leg only).")
    ] = "hybrid",
    types: Annotated[
        list[str] | None,
        typer.Option("--type", "-t", help=f"Only these types (repeatable): {TYPE_NAMES}."),
    ] = None,
    include_inactive: Annotated[
        bool,
        typer.Option("--include-inactive", help="Also expired (superseded) memories."),
    ] = False,
    project: ProjectOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Hybrid search (vector + full-text + graph, fused by reciprocal rank).

    The query is plain text: operators and quotes in it (AND, NEAR(, "...", *) are searched as
    words, never parsed as query syntax.

    Errors: an empty query (exit code 3); a home that does not exist (exit code 4; nothing is created).

    Example:  memlane search "where does Alice work" --owner alice --type fact --type event
    """
    with engine_for(home) as engine:
        hits = engine.search(
            query,
            owner=owner,
            agent=agent,
            limit=limit,
            types=types,
            mode=mode,
            include_inactive=include_inactive,
            project=project_for(project),
        )
        owner = engine.owner_of(owner)
    if as_json:
        print_json([h.to_dict() for h in hits])
        return
    if not hits:
        out.print(Text(f"no memories of {owner!r} match this query", style="dim"))
        return
    t = table(f"{len(hits)} hits ({mode}; legs: rank in vector v, full-text f, graph g)")
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("score", justify="right", no_wrap=True)
    t.add_column("cos", justify="right", no_wrap=True)
    t.add_column("legs", no_wrap=True)
    t.add_column("memory (id below)", min_width=36)
    for n, h in enumerate(hits, start=1):
        legs = " ".join(f"{leg[0]}{rank}" for leg, rank in h.ranks.items())
        t.add_row(
            str(n),
            f"{h.score:.4f}",
            f"{h.similarity:.3f}",
            legs,
            memory_cell(h.memory, with_type=True),
        )
    out.print(t)


# --------------------------------------------------------------------------------- inject

_SKIP_WHY = {
    "trivial": "the prompt is trivial (too short, a slash command or an acknowledgement)",
    "disabled": "injection is disabled in the settings",
}


def why_nothing(injection: Injection) -> str:
    """A human reason for an empty injection."""
    for key, why in _SKIP_WHY.items():
        if injection.skipped.get(key):
            return why
    if injection.skipped:
        return "every candidate was left out (the next line says why)"
    return "no memory is relevant to this message"


#: Reasons of ``Injection.skipped`` that count the message, not candidates: nothing searched.
_NOT_SEARCHED = ("trivial", "disabled")


def left_out(injection: Injection) -> str:
    """How many candidates the turn left out and why, in words (:data:`SKIP_WORDS`), most
    first: ``"left out 3 of 16 candidates: 2 too close to a memory shown or chosen already, 1
    the same as another item of this block"``; ``"not searched: ..."`` for a trivial message
    or injection turned off; ``"nothing left out"``."""
    skipped = dict(injection.skipped)
    for key in _NOT_SEARCHED:
        if skipped.get(key):
            return f"not searched: {SKIP_WORDS.get(key, key)} ({key})"
    total = sum(skipped.values())
    if not total:
        return "nothing left out"
    shown = total + len(injection.items)
    reasons = sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))
    why = ", ".join(f"{n} {SKIP_WORDS.get(key, key.replace('_', ' '))}" for key, n in reasons)
    return f"left out {total} of {shown} candidates: {why}"


@command(app, "inject")
def inject(
    text: Annotated[str, typer.Argument(help="The user's message for this turn.")],
    session: Annotated[
        str, typer.Option("--session", "-s", help="Session id (tracks what it was shown).")
    ],
    owner: OwnerOption = None,
    agent: AgentOption = None,
    recent: Annotated[
        list[str] | None,
        typer.Option("--recent", help="A recent exchange enriching the query (repeatable)."),
    ] = None,
    project: ProjectOption = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help='Also show (on stderr; with --json, under "explain") each candidate\'s leg '
            "ranks and scores and the rule that kept or cut it.",
        ),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the memory block to insert before this model turn (one turn of the session).

    Memories this session was already shown within the window are not repeated. Without --json,
    stdout is exactly the block (nothing when nothing is injected: a note on stderr says why).

    Errors: an empty session or text (exit code 3); a home that does not exist (exit code 4; nothing is created).

    Example:  memlane inject "Which editor should I install?" --session chat-1 --owner alice
    """
    with engine_for(home) as engine, explaining() as verdicts:
        injection = engine.inject(
            session, text, owner=owner, agent=agent, recent=recent, project=project_for(project)
        )
    if as_json:
        shown = injection.to_dict()
        if explain:
            shown["explain"] = explain_rows(verdicts, injection)
        print_json(shown)
        return
    if explain:
        err.print(explain_table(verdicts, injection))
    if injection.block:
        out.print(Text(injection.block))
    else:
        err.print(Text(f"nothing injected: {why_nothing(injection)}", style="dim"))
    err.print(
        Text(
            f"turn {injection.turn} · {len(injection.items)} injected · "
            f"{left_out(injection)} · {injection.elapsed_ms:.1f} ms",
            style="dim",
        )
    )
