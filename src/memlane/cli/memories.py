"""CLI commands on memories: add, import, list, get, update, forget, history, dedup-log.

Every command takes ``--home`` and ``--owner`` (by-id commands find a memory only in that
owner's scope); every command that prints data takes ``--json`` (one JSON document on stdout).
Tables and notes are for humans; progress bars and errors go to stderr. A memlane error prints
one line, ``error: <message>``, on stderr and exits with the code of its class (docs/errors.md).
"""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

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
    fail,
    one_line,
    out,
    print_error,
    print_json,
    progress_bar,
)
from memlane.cli.privacy import restore_export
from memlane.cli.render import (
    associations_table,
    check_offered,
    command,
    decision_text,
    engine_for,
    history_table,
    key_value_grid,
    memory_table,
    print_memory,
    project_for,
    short,
    table,
    when,
    write_result_dict,
)
from memlane.cli.restore import why_not_active
from memlane.engine import MemoryInput
from memlane.errors import InvalidMemory, MemlaneError, NotFound
from memlane.transfer import is_export
from memlane.types import Decision, MemoryType

log = logging.getLogger("memlane.cli")

TYPE_NAMES = ", ".join(t.value for t in MemoryType)
DECISION_NAMES = ", ".join(d.value for d in Decision)

#: Valid lines are written in chunks of this many: each chunk is one transaction and one
#: batch of embeddings, and the progress bar moves between chunks.
IMPORT_CHUNK = 256

MemoryIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="Memory id.", show_default=False)
]
LimitOption = Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")]

# --------------------------------------------------------------------------------- add


@command(app, "add")
def add(
    text: Annotated[str, typer.Argument(help="The memory text.", show_default=False)],
    type: Annotated[
        str, typer.Option("--type", "-t", help=f"Memory type: {TYPE_NAMES}.")
    ] = MemoryType.FACT.value,
    owner: OwnerOption = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent the memory belongs to (default: none).")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Session the memory was learned in.")
    ] = None,
    importance: Annotated[
        float | None,
        typer.Option("--importance", help="0..1 (default: the type's default importance)."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Where it came from (e.g. chat, import).")
    ] = None,
    project: ProjectOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Store one memory through the write path (no duplicates) and print the decision.

    The decision is one of: added, hash_exact, auto_reject, replaced, gray_keep, guard_keep
    (and llm_*/fallback_* with an LLM). Empty text, an injected context block or an unknown type
    is refused and nothing is written (exit code 3). A home that does not exist yet is created
    (said once on stderr).

    Example:  memlane add "Alice prefers dark mode" --type preference --owner alice
    """
    offered = MemoryInput(text, type, owner, agent, session, importance, source, {})
    with engine_for(home, create=True, check=lambda s: check_offered(s, offered)) as engine:
        result = engine.add(
            text,
            type=type,
            owner=owner,
            agent=agent,
            session=session,
            importance=importance,
            source=source,
            project=project_for(project),
        )
    if as_json:
        print_json(write_result_dict(result))
        return
    note = (
        "  (not stored again: the existing memory absorbed it)"
        if result.duplicate
        else "  (stored as a memory of its own)"
    )
    rows: list[tuple[str, str | Text]] = [
        ("decision", Text.assemble(decision_text(result.decision), (note, "dim"))),
        ("memory", result.memory.id),
        ("matched", result.matched_id or "-"),
        ("similarity", short(result.similarity)),
    ]
    if result.reasoning:
        rows.append(("reason", result.reasoning))
    rows.append(("content", result.memory.content))
    out.print(key_value_grid(rows))


# --------------------------------------------------------------------------------- import


def _read_lines(file: Path) -> list[bytes]:
    if str(file) == "-":
        return sys.stdin.buffer.read().split(b"\n")
    return file.read_bytes().split(b"\n")


def _parse_line(raw: bytes, default_owner: str | None) -> MemoryInput:
    """One JSONL line -> a :class:`MemoryInput`. Raises :class:`InvalidMemory` with the reason."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMemory(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidMemory(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InvalidMemory(
            f"expected a JSON object with a 'content' field, got {type(data).__name__}"
        )
    if data.get("owner") is None:
        data["owner"] = default_owner
    return MemoryInput.from_dict(data)


@command(app, "import")
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            help="JSONL file: one JSON object per line ('-' reads stdin).", show_default=False
        ),
    ],
    owner: Annotated[
        str | None,
        typer.Option(
            "--owner",
            help="Owner for lines that do not name one. Default: [scope] owner, else default.",
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import memories from a JSONL file through the write path (duplicates are not stored).

    A file written by `memlane export` (its first line is the memlane-export header) is
    restored as it was instead: same ids, statuses, timestamps and history (docs/security.md).

    Each line is a JSON object with "content" and optionally "type", "owner", "agent",
    "session", "importance", "source", "metadata". Blank lines are ignored. A bad line (not
    JSON, not an object, or an invalid memory: empty, too long, an injected block, unknown type
    ...) is reported with its line number and the reason; every good line is still imported.
    Valid lines are written in chunks of 256, one transaction each.

    Exit code: 0 when every line was imported; a bad line (exit code 1: the good ones are
    imported all the same); a file that cannot be read (exit code 1). An error of the store (disk full, busy, read-only) stops the import
    with the code of its class (docs/errors.md); the chunks committed before it stay, and
    importing the file again adds only what is missing. With -v each committed chunk is logged.

    Example:  memlane import examples/memories.jsonl --owner alice --json
    """
    try:
        raw_lines = _read_lines(file)
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror or exc}") from None
    if raw_lines and raw_lines[0].startswith(b"\xef\xbb\xbf"):  # UTF-8 byte order mark
        raw_lines[0] = raw_lines[0][3:]
    if raw_lines and is_export(raw_lines[0].decode("utf-8", "replace")):
        restore_export(raw_lines, home, as_json)  # memlane export's file: restored as it was
        return
    numbered = [(n, raw) for n, raw in enumerate(raw_lines, start=1) if raw.strip()]

    errors: list[dict[str, Any]] = []
    decisions: Counter[str] = Counter()
    imported = 0
    with engine_for(home, create=True) as engine, progress_bar() as progress:
        task = progress.add_task("importing", total=len(numbered))
        chunk: list[tuple[int, MemoryInput]] = []

        def flush() -> None:
            nonlocal imported
            if not chunk:
                return
            try:
                results = engine.add_many([item for _, item in chunk])
            except MemlaneError as exc:
                progress.stop()
                first, last = chunk[0][0], chunk[-1][0]
                raise fail(
                    f"import stopped at lines {first}-{last}: {one_line(str(exc))} "
                    f"({imported} memories from earlier lines were imported)",
                    exc.exit_code,
                ) from None
            log.info("committed lines %d-%d (%d memories)", chunk[0][0], chunk[-1][0], len(results))
            imported += len(results)
            decisions.update(r.decision.value for r in results)
            progress.advance(task, len(chunk))
            chunk.clear()

        for n, raw in numbered:
            try:
                item = _parse_line(raw, owner)
                engine.validate(item)
            except (InvalidMemory, TypeError, ValueError) as exc:
                errors.append({"line": n, "error": str(exc)})
                progress.advance(task)
                continue
            chunk.append((n, item))
            if len(chunk) >= IMPORT_CHUNK:
                flush()
        flush()

    stored = sum(c for d, c in decisions.items() if not Decision(d).duplicate)
    if as_json:
        print_json(
            {
                "file": str(file),
                "lines": len(numbered),
                "imported": imported,
                "stored": stored,
                "decisions": dict(decisions.most_common()),
                "errors": errors,
            }
        )
    else:
        t = table(f"imported {imported} of {len(numbered)} lines from {file}")
        t.add_column("decision")
        t.add_column("count", justify="right")
        for decision, count in decisions.most_common():
            t.add_row(decision_text(decision), str(count))
        out.print(t)
        out.print(f"{stored} new memories stored, {imported - stored} duplicates not stored again")
        for e in errors:
            print_error(f"line {e['line']}: {e['error']}")
        if errors:
            err.print(
                Text(
                    f"{len(errors)} bad line(s) not imported; the other lines were imported",
                    style="yellow",
                )
            )
    if errors:
        raise typer.Exit(code=1)


# --------------------------------------------------------------------------------- reads


@command(app, "list")
def list_(
    owner: OwnerOption = None,
    agent: AgentOption = None,
    type: Annotated[
        str | None, typer.Option("--type", "-t", help=f"Only this type: {TYPE_NAMES}.")
    ] = None,
    limit: LimitOption = 100,
    project: ProjectOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the active memories of an owner, newest first.

    Errors: an unknown --type (exit code 3); a home that does not exist (exit code 4; nothing is created).

    Example:  memlane list --owner alice --type preference --limit 20
    """
    with engine_for(home) as engine:
        scope = project_for(project)
        memories = engine.list(owner=owner, agent=agent, type=type, limit=limit, project=scope)
        owner = engine.owner_of(owner)
    if as_json:
        print_json([m.to_dict() for m in memories])
        return
    where = f" in project {scope} (and global)" if scope else ""
    if not memories:
        out.print(Text(f"no memories for owner {owner!r}{where}", style="dim"))
        return
    out.print(memory_table(memories, title=f"{len(memories)} memories of {owner}{where}"))


@command(app, "get")
def get(
    memory_id: MemoryIdArgument,
    owner: OwnerOption = None,
    agent: AgentOption = None,
    include_inactive: Annotated[
        bool,
        typer.Option("--include-inactive", help="Also show a forgotten or superseded memory."),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one memory with its text history and its associations.

    Errors: an id not in the owner's scope (exit code 4).

    Example:  memlane get 01a1fe35-5154-71f8-bc2c-fa27e9c4001f --owner alice --json
    """
    with engine_for(home) as engine:
        try:
            memory = engine.get(
                memory_id, owner=owner, agent=agent, include_inactive=include_inactive
            )
        except NotFound as exc:  # forgotten or superseded: say so, and how to get it back
            raise why_not_active(engine, memory_id, owner, agent) or exc from None
        versions = engine.history(memory_id, owner=owner, agent=agent)
        links = engine.associations(memory_id, owner=owner, agent=agent)
    if as_json:
        data = memory.to_dict()
        data["history"] = [v.to_dict() for v in versions]
        data["associations"] = [a.to_dict() for a in links]
        print_json(data)
        return
    print_memory(memory)
    if versions:
        out.print(history_table(versions))
    if links:
        out.print(associations_table(memory.id, links))


@command(app, "history")
def history(
    memory_id: MemoryIdArgument,
    owner: OwnerOption = None,
    agent: AgentOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the previous texts of a memory (every replace, merge or update keeps the old text).

    Errors: an id not in the owner's scope (exit code 4).

    Example:  memlane history 01a1fe35-5154-71f8-bc2c-fa27e9c4001f --owner alice
    """
    with engine_for(home) as engine:
        versions = engine.history(memory_id, owner=owner, agent=agent)
        current = engine.get(memory_id, owner=owner, agent=agent, include_inactive=True)
    if as_json:
        print_json([v.to_dict() for v in versions])
        return
    out.print(Text.assemble(("current: ", "bold"), current.content))
    if not versions:
        out.print(Text("no previous texts: this memory was never changed", style="dim"))
        return
    out.print(history_table(versions))


@command(app, "update")
def update(
    memory_id: MemoryIdArgument,
    text: Annotated[str, typer.Argument(help="The new text.", show_default=False)],
    owner: OwnerOption = None,
    agent: AgentOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give a memory new text (same id; the old text is kept in its history).

    Errors: an id not in the owner's scope (exit code 4); empty text (exit code 3).

    Example:  memlane update 01a1fe35-5154-71f8-bc2c-fa27e9c4001f "Alice works at Initech" --owner alice
    """
    with engine_for(home) as engine:
        memory = engine.update(memory_id, text, owner=owner, agent=agent)
    if as_json:
        print_json(memory.to_dict())
        return
    out.print(Text.assemble(("updated ", "green"), (memory.id, "bold"), "  ", memory.content))


@command(app, "forget")
def forget(
    memory_id: MemoryIdArgument,
    owner: OwnerOption = None,
    agent: AgentOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
    purge: Annotated[
        bool,
        typer.Option(
            "--purge",
            help="Delete it for real: its text, history, dedup log rows and index entries "
            "(docs/security.md).",
        ),
    ] = False,
) -> None:
    """Forget a memory: it is never searched or injected again (kept on disk with its history;
    with --purge deleted from disk).

    Errors: an id not in the owner's scope (exit code 4).

    Example:  memlane forget 01a1fe35-5154-71f8-bc2c-fa27e9c4001f --owner alice
    """
    with engine_for(home) as engine:
        if purge:
            memory = engine.get(memory_id, owner=owner, agent=agent, include_inactive=True)
            engine.purge(memory.id, owner=owner, agent=agent)
            if as_json:
                print_json({"purged": [memory.id]})
            else:
                out.print(Text.assemble(("purged ", "red"), (memory.id, "bold")))
            return
        memory = engine.forget(memory_id, owner=owner, agent=agent)
    if as_json:
        print_json(memory.to_dict())
        return
    out.print(Text.assemble(("forgotten ", "yellow"), (memory.id, "bold"), "  ", memory.content))


@command(app, "dedup-log")
def dedup_log(
    owner: OwnerOption = None,
    decision: Annotated[
        str | None, typer.Option("--decision", "-d", help=f"Only this decision: {DECISION_NAMES}.")
    ] = None,
    limit: LimitOption = 100,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the write path's dedup log (every decision at or above gray_low), newest first.

    Errors: a home that does not exist (exit code 4; nothing is created).

    Example:  memlane dedup-log --owner alice --decision replaced
    """
    with engine_for(home) as engine:
        rows = engine.dedup_log(owner=owner, decision=decision, limit=limit)
        owner = engine.owner_of(owner)
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    if not rows:
        out.print(Text("the dedup log is empty for this filter", style="dim"))
        return
    t = table(f"dedup log of {owner} ({len(rows)} rows, newest first)")
    t.add_column("when", no_wrap=True)
    t.add_column("decision", no_wrap=True)
    t.add_column("sim", justify="right", no_wrap=True)
    t.add_column("offered text / existing memory", min_width=38)
    for r in rows:
        texts = Text.assemble(
            ("new:  ", "dim"), r.new_text, ("\nwas:  ", "dim"), r.existing_text or "-"
        )
        if r.existing_id:
            texts.append(f"\n{r.existing_id}", style="dim")  # whole at 80 columns
        t.add_row(
            when(r.created_at),
            decision_text(r.decision),
            short(r.similarity, 3),
            texts,
        )
    out.print(t)
