"""CLI commands on memories: add, import, list, get, update, forget, history, dedup-log, search,
inject.

Every command takes ``--home``; every command that prints data takes ``--json`` (one JSON document
on stdout). Tables and notes are for humans; progress bars and errors go to stderr. A memlane
error prints ``error: <message>`` on stderr and exits with code 1.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from memlane.cli.app import (
    AgentOption,
    HomeOption,
    JsonOption,
    OwnerOption,
    app,
    err,
    fail,
    handle_errors,
    out,
    print_error,
    print_json,
    progress_bar,
)
from memlane.engine import MemoryEngine, MemoryInput
from memlane.errors import InvalidMemory, MemlaneError
from memlane.types import (
    Association,
    Decision,
    Injection,
    Memory,
    MemoryType,
    MemoryVersion,
    WriteResult,
)

TYPE_NAMES = ", ".join(t.value for t in MemoryType)
DECISION_NAMES = ", ".join(d.value for d in Decision)

#: Valid lines are written in chunks of this many: each chunk is one transaction and one
#: batch of embeddings, and the progress bar moves between chunks.
IMPORT_CHUNK = 256

F = TypeVar("F", bound=Callable[..., Any])

MemoryIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="Memory id.", show_default=False)
]
LimitOption = Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")]

# --------------------------------------------------------------------------------- helpers


def reflow(doc: str | None) -> str:
    """A docstring as ``--help`` text: paragraphs kept, line breaks inside them joined (so the
    terminal wraps them), one example per command on its own line."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def command(group: typer.Typer, name: str) -> Callable[[F], F]:
    """Register ``fn`` as command ``name`` of ``group`` with its reflowed docstring as help."""

    def register(fn: F) -> F:
        group.command(name, help=reflow(fn.__doc__))(fn)
        return fn

    return register


@contextmanager
def engine_for(home: Path | None) -> Iterator[MemoryEngine]:
    """Open the engine of ``--home`` for one command; memlane errors become ``error: ...``."""
    with handle_errors():
        engine = MemoryEngine.open(home)
        try:
            yield engine
        finally:
            engine.close()


_DECISION_STYLE = {
    Decision.ADDED: "green",
    Decision.GRAY_KEEP: "cyan",
    Decision.GUARD_KEEP: "cyan",
    Decision.LLM_KEEP: "cyan",
    Decision.FALLBACK_KEEP: "cyan",
}


def decision_text(decision: Decision | str) -> Text:
    d = Decision(decision)
    return Text(d.value, style=_DECISION_STYLE.get(d, "yellow"))


def table(title: str | None = None) -> Table:
    """A table for humans: light borders so the text columns get the width."""
    return Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)


def key_value_grid(rows: Iterable[tuple[str, str | Text]]) -> Table:
    """Borderless ``key  value`` lines, the keys in bold (values printed verbatim)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for key, value in rows:
        grid.add_row(key, Text(value) if isinstance(value, str) else value)
    return grid


def counts_text(counts: Mapping[str, int]) -> str:
    """``"a 2, b 1"``: the counts sorted by name (empty for none)."""
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def memory_cell(memory: Memory, *, with_type: bool = False) -> Text:
    """The memory's text and, on a second (dim) line, its id (to copy into get/forget)."""
    cell = Text()
    if with_type:
        cell.append(f"[{memory.type.value}] ", style="magenta")
    cell.append(memory.content)
    cell.append(f"\n{memory.id}", style="dim")
    return cell


def _short(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _when(memory_time: Any) -> str:
    return "-" if memory_time is None else memory_time.strftime("%Y-%m-%d %H:%M")


def write_result_dict(result: WriteResult) -> dict[str, Any]:
    data = result.to_dict()
    data["duplicate"] = result.duplicate
    return data


def memory_table(memories: Sequence[Memory], title: str | None = None) -> Table:
    t = table(title)
    t.add_column("type", no_wrap=True)
    t.add_column("memory (id below)", min_width=36)
    t.add_column("imp", justify="right", no_wrap=True)
    t.add_column("conf", justify="right", no_wrap=True)
    t.add_column("created", no_wrap=True)
    for m in memories:
        t.add_row(
            m.type.value,
            memory_cell(m),
            f"{m.importance:.2f}",
            str(m.confirmations),
            _when(m.created_at),
        )
    return t


def print_memory(memory: Memory) -> None:
    rows = (
        ("id", memory.id),
        ("content", memory.content),
        ("type", memory.type.value),
        ("status", memory.status.value),
        ("owner", memory.owner),
        ("agent", memory.agent or "-"),
        ("session", memory.session or "-"),
        ("source", memory.source or "-"),
        ("importance", f"{memory.importance:.2f}"),
        ("confirmations", str(memory.confirmations)),
        ("accessed", f"{memory.access_count} times, last {_when(memory.last_accessed_at)}"),
        ("created", memory.created_at.isoformat()),
        ("updated", memory.updated_at.isoformat()),
        ("metadata", json.dumps(dict(memory.metadata), ensure_ascii=False) or "{}"),
    )
    out.print(key_value_grid(rows))


def history_table(versions: Sequence[MemoryVersion]) -> Table:
    t = table("history (previous texts, oldest first)")
    t.add_column("v", justify="right", no_wrap=True)
    t.add_column("replaced", no_wrap=True)
    t.add_column("reason", no_wrap=True)
    t.add_column("previous text")
    for v in versions:
        t.add_row(str(v.version), _when(v.replaced_at), v.reason, Text(v.content))
    return t


def associations_table(memory_id: str, links: Sequence[Association]) -> Table:
    t = table("associations")
    t.add_column("dir", no_wrap=True)
    t.add_column("relation", no_wrap=True)
    t.add_column("other memory", no_wrap=True)
    t.add_column("weight", justify="right", no_wrap=True)
    for a in links:
        outgoing = a.source_id == memory_id
        t.add_row(
            "->" if outgoing else "<-",
            a.relation.value,
            a.target_id if outgoing else a.source_id,
            f"{a.weight:.3f}",
        )
    return t


# --------------------------------------------------------------------------------- add


@command(app, "add")
def add(
    text: Annotated[str, typer.Argument(help="The memory text.", show_default=False)],
    type: Annotated[
        str, typer.Option("--type", "-t", help=f"Memory type: {TYPE_NAMES}.")
    ] = MemoryType.FACT.value,
    owner: OwnerOption = "default",
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
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Store one memory through the write path (no duplicates) and print the decision.

    The decision is one of: added, hash_exact, auto_reject, replaced, gray_keep, guard_keep
    (and llm_*/fallback_* with an LLM). Empty text, an injected context block or an unknown type
    is refused with exit code 1 and nothing is written.

    Example:  memlane add "Alice prefers dark mode" --type preference --owner alice
    """
    with engine_for(home) as engine:
        result = engine.add(
            text,
            type=type,
            owner=owner,
            agent=agent,
            session=session,
            importance=importance,
            source=source,
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
        ("similarity", _short(result.similarity)),
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


def _parse_line(raw: bytes, default_owner: str) -> MemoryInput:
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
        str, typer.Option("--owner", help="Owner for lines that do not name one.")
    ] = "default",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import memories from a JSONL file through the write path (duplicates are not stored).

    Each line is a JSON object with "content" and optionally "type", "owner", "agent",
    "session", "importance", "source", "metadata". Blank lines are ignored. A bad line (not
    JSON, not an object, or an invalid memory: empty, too long, an injected block, unknown type
    ...) is reported with its line number and the reason; every good line is still imported.
    Valid lines are written in chunks of 256, one transaction each.

    Exit code: 0 when every line was imported, 1 when any line was bad (the good ones are
    imported all the same).

    Example:  memlane import examples/memories.jsonl --owner alice --json
    """
    try:
        raw_lines = _read_lines(file)
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror or exc}") from None
    if raw_lines and raw_lines[0].startswith(b"\xef\xbb\xbf"):  # UTF-8 byte order mark
        raw_lines[0] = raw_lines[0][3:]
    numbered = [(n, raw) for n, raw in enumerate(raw_lines, start=1) if raw.strip()]

    errors: list[dict[str, Any]] = []
    decisions: Counter[str] = Counter()
    imported = 0
    with engine_for(home) as engine, progress_bar() as progress:
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
                    f"import stopped at lines {first}-{last}: {exc} "
                    f"({imported} memories from earlier lines were imported)"
                ) from None
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
    owner: OwnerOption = "default",
    agent: AgentOption = None,
    type: Annotated[
        str | None, typer.Option("--type", "-t", help=f"Only this type: {TYPE_NAMES}.")
    ] = None,
    limit: LimitOption = 100,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the active memories of an owner, newest first.

    Example:  memlane list --owner alice --type preference --limit 20
    """
    with engine_for(home) as engine:
        memories = engine.list(owner=owner, agent=agent, type=type, limit=limit)
    if as_json:
        print_json([m.to_dict() for m in memories])
        return
    if not memories:
        out.print(Text(f"no memories for owner {owner!r}", style="dim"))
        return
    out.print(memory_table(memories, title=f"{len(memories)} memories of {owner}"))


@command(app, "get")
def get(
    memory_id: MemoryIdArgument,
    include_inactive: Annotated[
        bool,
        typer.Option("--include-inactive", help="Also show a forgotten or superseded memory."),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one memory with its text history and its associations.

    Example:  memlane get 01a1fe35-5154-71f8-bc2c-fa27e9c4001f --json
    """
    with engine_for(home) as engine:
        memory = engine.get(memory_id, include_inactive=include_inactive)
        versions = engine.history(memory_id)
        links = engine.associations(memory_id)
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
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the previous texts of a memory (every replace, merge or update keeps the old text).

    Example:  memlane history 01a1fe35-5154-71f8-bc2c-fa27e9c4001f
    """
    with engine_for(home) as engine:
        versions = engine.history(memory_id)
        current = engine.get(memory_id, include_inactive=True)
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
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give a memory new text (same id; the old text is kept in its history).

    Example:  memlane update 01a1fe35-5154-71f8-bc2c-fa27e9c4001f "Alice works at Initech"
    """
    with engine_for(home) as engine:
        memory = engine.update(memory_id, text)
    if as_json:
        print_json(memory.to_dict())
        return
    out.print(Text.assemble(("updated ", "green"), (memory.id, "bold"), "  ", memory.content))


@command(app, "forget")
def forget(
    memory_id: MemoryIdArgument,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Forget a memory: it is never searched or injected again (kept on disk with its history).

    Example:  memlane forget 01a1fe35-5154-71f8-bc2c-fa27e9c4001f
    """
    with engine_for(home) as engine:
        memory = engine.forget(memory_id)
    if as_json:
        print_json(memory.to_dict())
        return
    out.print(Text.assemble(("forgotten ", "yellow"), (memory.id, "bold"), "  ", memory.content))


@command(app, "dedup-log")
def dedup_log(
    owner: Annotated[
        str | None, typer.Option("--owner", help="Only this owner (default: all owners).")
    ] = None,
    decision: Annotated[
        str | None, typer.Option("--decision", "-d", help=f"Only this decision: {DECISION_NAMES}.")
    ] = None,
    limit: LimitOption = 100,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the write path's dedup log (every decision at or above gray_low), newest first.

    Example:  memlane dedup-log --owner alice --decision replaced
    """
    with engine_for(home) as engine:
        rows = engine.dedup_log(owner=owner, decision=decision, limit=limit)
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    if not rows:
        out.print(Text("the dedup log is empty for this filter", style="dim"))
        return
    t = table(f"dedup log ({len(rows)} rows, newest first)")
    t.add_column("when", no_wrap=True)
    t.add_column("decision", no_wrap=True)
    t.add_column("sim", justify="right", no_wrap=True)
    t.add_column("owner")
    t.add_column("offered text / existing memory", min_width=30)
    for r in rows:
        texts = Text.assemble(
            ("new:  ", "dim"), r.new_text, ("\nwas:  ", "dim"), r.existing_text or "-"
        )
        if r.existing_id:
            texts.append(f"\n      {r.existing_id}", style="dim")
        t.add_row(
            _when(r.created_at),
            decision_text(r.decision),
            _short(r.similarity, 3),
            r.owner,
            texts,
        )
    out.print(t)


# --------------------------------------------------------------------------------- search


@command(app, "search")
def search(
    query: Annotated[
        str, typer.Argument(help="What to look for (plain text).", show_default=False)
    ],
    owner: OwnerOption = "default",
    agent: AgentOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many hits.")] = 10,
    mode: Annotated[
        str, typer.Option("--mode", help="hybrid (default), vector or fts (one leg only).")
    ] = "hybrid",
    types: Annotated[
        list[str] | None,
        typer.Option("--type", "-t", help=f"Only these types (repeatable): {TYPE_NAMES}."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Hybrid search (vector + full-text + graph, fused by reciprocal rank).

    The query is plain text: operators and quotes in it (AND, NEAR(, "...", *) are searched as
    words, never parsed as query syntax.

    Example:  memlane search "where does Alice work" --owner alice --type fact --type event
    """
    with engine_for(home) as engine:
        hits = engine.search(query, owner=owner, agent=agent, limit=limit, types=types, mode=mode)
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
        return f"every candidate was left out ({counts_text(injection.skipped)})"
    return "no memory is relevant to this message"


@command(app, "inject")
def inject(
    text: Annotated[str, typer.Argument(help="The user's message for this turn.")],
    session: Annotated[
        str, typer.Option("--session", "-s", help="Session id (tracks what it was shown).")
    ],
    owner: OwnerOption = "default",
    agent: AgentOption = None,
    recent: Annotated[
        list[str] | None,
        typer.Option("--recent", help="A recent exchange enriching the query (repeatable)."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the memory block to insert before this model turn (one turn of the session).

    Memories this session was already shown within the window are not repeated. Without --json,
    stdout is exactly the block (nothing when nothing is injected: a note on stderr says why).

    Example:  memlane inject "Which editor should I install?" --session chat-1 --owner alice
    """
    with engine_for(home) as engine:
        injection = engine.inject(session, text, owner=owner, agent=agent, recent=recent)
    if as_json:
        print_json(injection.to_dict())
        return
    if injection.block:
        out.print(Text(injection.block))
    else:
        err.print(Text(f"nothing injected: {why_nothing(injection)}", style="dim"))
    skipped = counts_text(injection.skipped) or "none"
    err.print(
        Text(
            f"turn {injection.turn} · {len(injection.items)} injected · skipped: {skipped} · "
            f"{injection.elapsed_ms:.1f} ms",
            style="dim",
        )
    )
