"""Export and import that round-trip (issue #24, docs/security.md "Export"): every memory with
its type, scope, importance, metadata, status, timestamps, counters and history.

The format, ``memlane-export`` version 1, is JSON Lines (UTF-8):

- line 1, the header: ``{"format": "memlane-export", "version": 1, "exported_at": ISO 8601,
  "owner": "<owner>" | null (every owner), "embedding_model": "<name>", "memories": N}``;
- then one line per memory: :meth:`memlane.types.Memory.to_dict` (``id``, ``content``, ``type``,
  ``importance``, ``owner``, ``agent``, ``session``, ``source``, ``created_at``,
  ``updated_at``, ``last_accessed_at``, ``access_count``, ``confirmations``, ``content_hash``,
  ``status``, ``metadata``, ``valid_to``, ``project``) plus ``"history"``: the previous texts,
  oldest first (``version``, ``content``, ``content_hash``, ``reason``, ``replaced_at``). A
  line without ``project`` (an export made before the project scope) imports as global.

Embeddings are not exported: the importing engine embeds each text with its own model, so an
export moves between models. Dedup log, sessions and associations are not exported (they
describe the past of one store, not the memories).

:func:`import_lines` restores each memory as it was (same id and status) through the write
path's checks (limits, secrets and ``<private>`` spans, :mod:`memlane.privacy`), all or
nothing: one bad line (named with its number, field and problem) and nothing is written; an id
already in the store for the same owner is skipped, so importing the same file twice adds
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from memlane._ids import is_id, to_iso, utcnow
from memlane._text import content_hash
from memlane.dedup.write import MemoryInput
from memlane.errors import InvalidArgument, InvalidMemory
from memlane.types import ChangeReason, Memory, MemoryType, MemoryVersion, Status

if TYPE_CHECKING:
    from memlane.engine import MemoryEngine

FORMAT = "memlane-export"
VERSION = 1
#: Ids looked up per query when an import checks which are stored already.
CHUNK = 256
#: The largest counter an import takes (``access_count``, ``confirmations``, a history
#: ``version``): PostgreSQL's ``integer``, the narrowest column that holds one.
MAX_COUNT = 2**31 - 1
#: How far after this machine's clock an imported time may be (two machines' clocks differ).
CLOCK_SKEW = timedelta(days=1)


def export_lines(engine: MemoryEngine, owner: str | None = None) -> Iterator[str]:
    """The export of ``owner`` (None: every owner), one JSON line at a time, header first."""
    owners = [owner] if owner is not None else sorted({o for o, *_ in engine.counts()})
    memories: list[Memory] = []
    for name in owners:
        for status in Status:
            memories += engine.list(owner=name, limit=2**62, status=status)
    memories.sort(key=lambda m: (m.owner, m.created_at, m.id))
    yield json.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "exported_at": to_iso(utcnow()),
            "owner": owner,
            "embedding_model": engine.model_name,
            "memories": len(memories),
        },
        ensure_ascii=False,
    )
    for m in memories:
        row = m.to_dict()
        row["history"] = [
            {k: v for k, v in h.to_dict().items() if k != "memory_id"}
            for h in engine.history(m.id, owner=m.owner)
        ]
        yield json.dumps(row, ensure_ascii=False)


@dataclass
class ImportReport:
    """What :func:`import_lines` did: memories restored, skipped (id already stored for the
    same owner), and the bad lines (``{"line": n, "error": why}``; any bad line: nothing was
    restored)."""

    restored: int = 0
    skipped: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)


def is_export(first_line: str) -> bool:
    """Whether ``first_line`` is a ``memlane-export`` header."""
    try:
        head = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return isinstance(head, dict) and head.get("format") == FORMAT


def import_lines(engine: MemoryEngine, lines: Iterable[str | bytes]) -> ImportReport:
    """Restore a ``memlane-export`` file's memories into ``engine``'s store, all or nothing.

    Every line is checked before anything is written: UTF-8 (``bytes`` lines are decoded
    strictly), JSON (nested too deep is an error, not a crash), a memlane id
    (:func:`memlane._ids.is_id`), each field (the write path's checks, counters in
    0..:data:`MAX_COUNT`, times with an offset and not after this machine's clock plus
    :data:`CLOCK_SKEW`), an id once in the file, and not the id of another owner's memory in
    the store. Any bad line: the report lists each (line number, field, problem) and nothing
    is written. Otherwise the new memories are restored in one transaction (an id already
    stored for the same owner is skipped: importing the same file twice adds nothing).

    Raises:
        InvalidArgument: no header, or a version this memlane cannot read.
        EmbeddingError, StoreError: the model or the store failed (nothing written).
    """
    report = ImportReport()
    numbered: list[tuple[int, str]] = []
    for n, line in enumerate(lines, start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                report.errors.append(
                    {"line": n, "error": f"not UTF-8 ({exc.reason} at byte {exc.start})"}
                )
                continue
        if line.strip():
            numbered.append((n, line))
    if not numbered or not is_export(numbered[0][1]):
        raise InvalidArgument(f"not a {FORMAT} file: the first line must be its header")
    version = json.loads(numbered[0][1]).get("version")
    if version != VERSION:
        raise InvalidArgument(f"{FORMAT} version {version!r}: this memlane reads version 1")
    now = utcnow()
    parsed: list[tuple[int, Memory, list[MemoryVersion]]] = []
    seen: dict[str, int] = {}  # id: the line it is on
    for n, line in numbered[1:]:
        try:
            memory, history = _parse(engine, _json(line), now)
            if memory.id in seen:
                raise ValueError(f"id: {memory.id} is also the id on line {seen[memory.id]}")
        except (ValueError, TypeError, KeyError, OverflowError, InvalidMemory) as exc:
            report.errors.append({"line": n, "error": " ".join(str(exc).split())})
            continue
        seen[memory.id] = n
        parsed.append((n, memory, history))
    holders = _stored_owners(engine, list(seen))
    ready = []
    for n, memory, history in parsed:
        holder = holders.get(memory.id)
        if holder is None:
            ready.append((memory, history))
        elif holder == memory.owner:
            report.skipped += 1
        else:
            report.errors.append(
                {"line": n, "error": f"id: {memory.id} is a memory of another owner in this store"}
            )
    if report.errors:
        report.errors.sort(key=lambda e: int(e["line"]))
        report.skipped = 0
        return report  # nothing written
    report.restored = engine.restore_memories(ready)
    return report


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("the JSON is nested too deep to read") from None
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def _stored_owners(engine: MemoryEngine, ids: list[str]) -> dict[str, str]:
    """``{id: owner}`` of the ``ids`` already in the store, whichever owner holds them."""
    found: dict[str, str] = {}
    for owner in sorted({o for o, *_ in engine.counts()}):
        for start in range(0, len(ids), CHUNK):
            for memory_id in engine.get_many(ids[start : start + CHUNK], owner=owner):
                found[memory_id] = owner
    return found


def _parse(engine: MemoryEngine, row: Any, now: datetime) -> tuple[Memory, list[MemoryVersion]]:
    """One exported memory, each field checked (the text by the write path: limits, secrets,
    private spans). Raises ``ValueError`` (or :class:`InvalidMemory`) naming the field."""
    if not isinstance(row, dict):
        raise ValueError(f"not a JSON object but a JSON {type(row).__name__}")
    memory_id = row.get("id")
    if not is_id(memory_id):
        raise ValueError(f"id: {_show(memory_id)} is not a memlane id (a UUID as export writes)")
    for key in ("content", "type", "owner", "importance", "created_at"):
        if key not in row:
            raise ValueError(f"{key}: missing")
    for key in ("content", "owner"):
        _text(row, key)
    for key in ("agent", "session", "source", "project"):
        if row.get(key) is not None:
            _text(row, key)
    if not isinstance(row.get("metadata") or {}, dict):
        raise ValueError(f"metadata: {_show(row['metadata'])} is not a JSON object")
    importance = row["importance"]
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        raise ValueError(f"importance: {_show(importance)} is not a number in 0..1")
    draft = engine.validate(
        MemoryInput(
            row["content"],
            _enum(MemoryType, row, "type"),
            row["owner"],
            row.get("agent"),
            row.get("session"),
            float(importance),
            row.get("source"),
            row.get("metadata") or {},
            row.get("project"),  # absent from exports before the project scope: global
        )
    )
    created = _time(row, "created_at", now)
    memory = Memory(
        id=str(memory_id),
        content=draft.content,
        type=draft.type,
        importance=draft.importance,
        owner=draft.owner,
        agent=draft.agent,
        session=draft.session,
        source=draft.source,
        created_at=created,
        updated_at=_time(row, "updated_at", now, missing=created),
        last_accessed_at=_time(row, "last_accessed_at", now, missing=None),
        access_count=_count(row, "access_count"),
        confirmations=_count(row, "confirmations"),
        content_hash=draft.content_hash,
        status=_enum(Status, row, "status", Status.ACTIVE),
        metadata=draft.metadata,
        valid_to=_time(row, "valid_to", now, missing=None),
        project=draft.project,
    )
    history = []
    items = row.get("history") or []
    if not isinstance(items, list):
        raise ValueError(f"history: {_show(items)} is not a list")
    for i, h in enumerate(items):
        if not isinstance(h, dict):
            raise ValueError(f"history[{i}]: not a JSON object")
        old = _text(h, "content", name=f"history[{i}].content")
        text = engine.validate(MemoryInput(old, draft.type, draft.owner)).content
        history.append(
            MemoryVersion(
                memory_id=memory.id,
                version=_count(h, "version", low=1, name=f"history[{i}].version"),
                content=text,
                content_hash=content_hash(text),
                reason=_enum(ChangeReason, h, "reason", name=f"history[{i}].reason"),
                replaced_at=_time(h, "replaced_at", now, name=f"history[{i}].replaced_at"),
            )
        )
    return memory, history


def _show(value: Any) -> str:
    """``value`` as a short repr for an error line (an id of 100,000 characters is cut)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}... ({len(text):,} characters)"


def _text(row: dict[str, Any], key: str, *, name: str = "") -> str:
    """``row[key]``, a string."""
    value = row.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{name or key}: {_show(value)} is not a string")
    return value


def _count(row: dict[str, Any], key: str, *, low: int = 0, name: str | None = None) -> int:
    """``row[key]``: an integer in ``low``..:data:`MAX_COUNT` (absent or null: ``low``)."""
    value = row.get(key)
    if value is None:
        if low:
            raise ValueError(f"{name or key}: missing")
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        raise ValueError(
            f"{name or key}: {_show(value)} is not a whole number in {low}..{MAX_COUNT}"
        )
    return value


_E = TypeVar("_E", MemoryType, Status, ChangeReason)


def _enum(
    kind: type[_E], row: dict[str, Any], key: str, default: _E | None = None, *, name: str = ""
) -> _E:
    value = row.get(key)
    if value is None and default is not None:
        return default
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return kind(value)
    except ValueError:
        allowed = ", ".join(v.value for v in kind)
        raise ValueError(f"{name or key}: {_show(value)} is not one of {allowed}") from None


_MISSING: Any = object()


def _time(
    row: dict[str, Any], key: str, now: datetime, *, missing: Any = _MISSING, name: str = ""
) -> Any:
    """``row[key]`` as a UTC time: ISO 8601 with an offset, not after ``now`` plus
    :data:`CLOCK_SKEW` (a memory cannot be written in year 2999). Absent or null:
    ``missing`` (an error when not given)."""
    field_name = name or key
    value = row.get(key)
    if value is None:
        if missing is _MISSING:
            raise ValueError(f"{field_name}: missing")
        return missing
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None:
        raise ValueError(f"{field_name}: {_show(value)} is not an ISO 8601 time")
    if when.tzinfo is None:
        raise ValueError(f"{field_name}: {value} has no UTC offset (export writes +00:00)")
    if when > now + CLOCK_SKEW:
        raise ValueError(f"{field_name}: {value} is after this machine's clock ({to_iso(now)})")
    return when.astimezone(UTC)
