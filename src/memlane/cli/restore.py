"""``memlane restore``: undo ``memlane forget``; and what ``get`` says of a memory that is not
active (forgotten: how to restore it; superseded: how to see it)."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer
from rich.text import Text

from memlane.cli.app import HomeOption, JsonOption, OwnerOption, app, out, print_json
from memlane.cli.render import command, engine_for
from memlane.engine import MemoryEngine
from memlane.errors import NotFound
from memlane.types import Status

MemoryIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="Memory id.", show_default=False)
]


def why_not_active(
    engine: MemoryEngine, memory_id: str, owner: str | None, agent: str | None
) -> NotFound | None:
    """A :class:`NotFound` that says why ``memory_id`` was not found when it exists in the
    scope but is not active (forgotten: the ``memlane restore`` command that brings it back;
    superseded: ``--include-inactive``); ``None`` when there is no such memory at all."""
    try:
        memory = engine.get(memory_id, owner=owner, agent=agent, include_inactive=True)
    except NotFound:
        return None
    scope = f" --owner {shlex.quote(memory.owner)}" if owner is not None else ""
    day = memory.updated_at.date().isoformat()
    show = f"`memlane get {memory.id}{scope} --include-inactive` shows it"
    if memory.status is Status.FORGOTTEN:
        return NotFound(
            f"memory {memory.id} of {memory.owner!r} was forgotten on {day}: "
            f"`memlane restore {memory.id}{scope}` brings it back ({show})"
        )
    return NotFound(
        f"memory {memory.id} of {memory.owner!r} is {memory.status.value} (since {day}: a "
        f"newer memory holds its fact); {show}"
    )


@command(app, "restore")
def restore(
    memory_id: MemoryIdArgument,
    owner: OwnerOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Restore a forgotten memory: it is searched and injected again (same id and history).

    Errors: an id not in the owner's scope, or a memory that is not forgotten (exit code 4).

    Example:  memlane restore 01a1fe35-5154-71f8-bc2c-fa27e9c4001f --owner alice
    """
    with engine_for(home) as engine:
        memory = engine.restore(memory_id, owner=owner)
    if as_json:
        print_json(memory.to_dict())
        return
    out.print(Text.assemble(("restored ", "green"), (memory.id, "bold"), "  ", memory.content))
