"""What the CLI commands share: help text, the engine of ``--home``, tables and cells."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from memlane.cli.app import err, handle_errors, out
from memlane.config import Settings
from memlane.dedup.write import MemoryInput, WritePath
from memlane.engine import MemoryEngine
from memlane.errors import InvalidArgument, NotFound
from memlane.scope import ScopeError, resolve_owner, resolve_project
from memlane.types import Association, Decision, Memory, MemoryVersion, WriteResult

F = TypeVar("F", bound=Callable[..., Any])


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


def new_store(settings: Settings) -> bool:
    """True when ``settings`` name a SQLite store whose file does not exist yet (opening it
    would create it; a PostgreSQL store is the server's to have)."""
    return settings.store.backend == "sqlite" and not settings.db_path.exists()


def announce_new_store(settings: Settings) -> None:
    """The one line a write to a new home prints (stderr): where the store was created."""
    err.print(f"created a new memlane store: {settings.db_path}", highlight=False, markup=False)


def warn_loose_modes(settings: Settings) -> list[str]:
    """Print (stderr) one warning per file of the home that other local accounts can read:
    the home (wanted 0700) and the SQLite store's files and index files (0600), each with the
    ``chmod`` that fixes it (:func:`memlane._files.loose_modes`; docs/security.md). Returns the
    lines printed."""
    from memlane._files import loose_modes, store_files

    files = store_files(settings.db_path) if settings.store.backend == "sqlite" else []
    lines = loose_modes(settings.home_path, files)
    for line in lines:
        err.print(f"warning: {line}", highlight=False, markup=False)
    return lines


def project_for(value: str | None) -> str | None:
    """``--project`` as the identity it names (:func:`memlane.scope.resolve_project`: a folder
    inside a repository becomes the repository's identity; anything else is an identity as it
    is; ``None``: no project). Raises :class:`InvalidArgument` (exit 3) for a folder outside
    any repository or an identity that is too long."""
    try:
        return resolve_project(value)
    except ScopeError as exc:
        raise InvalidArgument(str(exc)) from None


def check_offered(settings: Settings, item: MemoryInput) -> None:
    """Validate ``item`` as the write path will (:meth:`WritePath.validate`: empty text, text
    only ``<private>``, a refused secret, a control character, an unknown type ...) before
    anything is opened or created. Raises :class:`InvalidMemory` (exit 3)."""
    if item.owner is None:
        item = dataclasses.replace(item, owner=resolve_owner(None, settings.scope.owner))
    # validate() reads only the [dedup] limits and the [privacy] decision: no store, no model
    rules = WritePath(
        cast(Any, None), cast(Any, None), settings.dedup, secrets=settings.privacy.secrets
    )
    rules.validate(item)


@contextmanager
def engine_for(
    home: Path | None,
    *,
    create: bool = False,
    check: Callable[[Settings], None] | None = None,
) -> Iterator[MemoryEngine]:
    """Open the engine of ``--home`` for one command; memlane errors become ``error: ...``.

    A home folder that does not exist (SQLite store): a read (``create`` false) raises
    :class:`NotFound` (exit 4) and creates nothing, so a typo in ``--home`` is not an empty
    answer; a write creates the home and its store and says so once on stderr. ``check`` runs
    on the settings before anything is opened or created (a write refused by it leaves no new
    home behind)."""
    with handle_errors():
        settings = Settings.load(home)
        if check is not None:
            check(settings)
        created = new_store(settings)
        if created and not create and not settings.home_path.exists():
            raise NotFound(
                f"no memlane home at {settings.home_path}: check --home or MEMLANE_HOME "
                "(`memlane add` or `memlane import` creates a new one)"
            )
        engine = MemoryEngine.open(home, settings)
        if created:
            announce_new_store(settings)
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


def short(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def when(memory_time: Any) -> str:
    return "-" if memory_time is None else memory_time.strftime("%Y-%m-%d %H:%M")


def write_result_dict(result: WriteResult) -> dict[str, Any]:
    """``result.to_dict()`` (the one serialisation of a write's outcome)."""
    return result.to_dict()


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
            when(m.created_at),
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
        ("accessed", f"{memory.access_count} times, last {when(memory.last_accessed_at)}"),
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
        t.add_row(str(v.version), when(v.replaced_at), v.reason.value, Text(v.content))
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
