"""CLI commands on injection sessions: ``memlane session reset`` and ``memlane session show``.

A session's tracking (turn counter, which memories it was shown and when, last reset) lives in the
store, so what one process injected is seen by the next one.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from memlane.cli.app import HomeOption, JsonOption, OwnerOption, app, out, print_json
from memlane.cli.render import command, counts_text, engine_for, key_value_grid, table
from memlane.types import ResetReason, SessionState

REASON_NAMES = ", ".join(r.value for r in ResetReason)

session_app = typer.Typer(
    name="session",
    help="Injection sessions: what a session was shown, and resetting it after compaction.",
    no_args_is_help=True,
)
app.add_typer(session_app, name="session")

SessionArgument = Annotated[
    str, typer.Argument(metavar="SESSION", help="Session id.", show_default=False)
]


def _state_grid(state: SessionState) -> Table:
    reset = (
        "never"
        if state.last_reset_at is None
        else f"{state.last_reset_at.isoformat()} ({state.last_reset_reason})"
    )
    return key_value_grid(
        [
            ("session", state.session),
            ("owner", state.owner),
            ("turn", str(state.turn)),
            ("injected", f"{len(state.injected)} memories tracked in the window"),
            ("last reset", reset),
            ("updated", "-" if state.updated_at is None else state.updated_at.isoformat()),
        ]
    )


@command(session_app, "reset")
def reset(
    session: SessionArgument,
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            "-r",
            help=f"Why: {REASON_NAMES} (after a compaction, a /clear, or a resumed session).",
            show_default=False,
        ),
    ],
    owner: OwnerOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Forget what a session was shown, so its memories may be injected again.

    Use it after the conversation history was compacted or cleared (the model no longer sees
    the old blocks), or when a session is resumed. An unknown reason is an error (exit code 3).

    Example:  memlane session reset chat-1 --reason compact --owner alice
    """
    with engine_for(home) as engine:
        state = engine.reset_session(session, reason, owner=owner)
    if as_json:
        print_json(state.to_dict())
        return
    out.print(
        Text.assemble(
            ("reset ", "green"),
            (state.session, "bold"),
            f" ({state.last_reset_reason}): its memories may be injected again",
        )
    )


@command(session_app, "show")
def show(
    session: SessionArgument,
    owner: OwnerOption = None,
    events: Annotated[
        int, typer.Option("--events", min=0, help="Recent injection events to show.")
    ] = 10,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session's tracking: turn, injected memories (with their turn), last reset, and its
    recent injection events.

    Errors: a home that does not exist (exit code 4; nothing is created).

    Example:  memlane session show chat-1 --owner alice --json
    """
    with engine_for(home) as engine:
        state = engine.session(session, owner=owner)
        recent = engine.session_events(session, owner=owner, limit=events) if events else []
        memories = engine.get_many(list(state.injected), owner=owner)
    if as_json:
        data: dict[str, Any] = state.to_dict()
        data["events"] = recent
        print_json(data)
        return
    out.print(_state_grid(state))
    if state.injected:
        t = table("injected memories (within the window)")
        t.add_column("turn", justify="right", no_wrap=True)
        t.add_column("memory (id below)", min_width=36)
        for memory_id, turn in sorted(state.injected.items(), key=lambda kv: (kv[1], kv[0])):
            memory = memories.get(memory_id)
            cell = Text.assemble(
                memory.content if memory else "(deleted)", (f"\n{memory_id}", "dim")
            )
            t.add_row(str(turn), cell)
        out.print(t)
    if recent:
        t = table(f"recent injection events (newest first, at most {events})")
        t.add_column("turn", justify="right", no_wrap=True)
        t.add_column("when", no_wrap=True)
        t.add_column("items", justify="right", no_wrap=True)
        t.add_column("skipped")
        t.add_column("ms", justify="right", no_wrap=True)
        for e in recent:
            skipped = counts_text(e["skipped"]) or "-"
            t.add_row(
                str(e["turn"]),
                str(e["created_at"])[:19].replace("T", " "),
                str(len(e["memory_ids"])),
                skipped,
                f"{e['elapsed_ms']:.1f}",
            )
        out.print(t)
    elif state.turn == 0:
        out.print(Text("this session has not been injected into yet", style="dim"))
