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
path's checks (limits, secrets and ``<private>`` spans, :mod:`memlane.privacy`); an id already
in the store is skipped, so importing the same file twice adds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memlane._ids import from_iso, to_iso, utcnow
from memlane._text import content_hash
from memlane.dedup.write import MemoryInput
from memlane.errors import InvalidArgument, InvalidMemory
from memlane.types import ChangeReason, Memory, MemoryType, MemoryVersion, Status

if TYPE_CHECKING:
    from memlane.engine import MemoryEngine

FORMAT = "memlane-export"
VERSION = 1
#: Memories embedded and restored per transaction on import.
CHUNK = 256


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
    """What :func:`import_lines` did: memories restored, skipped (id already stored), and the
    bad lines (``{"line": n, "error": why}``)."""

    restored: int = 0
    skipped: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)


def is_export(first_line: str) -> bool:
    """Whether ``first_line`` is a ``memlane-export`` header."""
    try:
        head = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(head, dict) and head.get("format") == FORMAT


def import_lines(engine: MemoryEngine, lines: Iterable[str]) -> ImportReport:
    """Restore a ``memlane-export`` file's memories into ``engine``'s store.

    Raises:
        InvalidArgument: no header, or a version this memlane cannot read.
    """
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    if not numbered or not is_export(numbered[0][1]):
        raise InvalidArgument(f"not a {FORMAT} file: the first line must be its header")
    version = json.loads(numbered[0][1]).get("version")
    if version != VERSION:
        raise InvalidArgument(f"{FORMAT} version {version!r}: this memlane reads version 1")
    report = ImportReport()
    parsed: list[tuple[Memory, list[MemoryVersion]]] = []
    for n, line in numbered[1:]:
        try:
            parsed.append(_parse(engine, json.loads(line)))
        except (ValueError, TypeError, KeyError, InvalidMemory) as exc:
            report.errors.append({"line": n, "error": f"{type(exc).__name__}: {exc}"})
    stored: set[tuple[str, str]] = set()  # (owner, id) of the memories already in the store
    for owner in {m.owner for m, _ in parsed}:
        ids = [m.id for m, _ in parsed if m.owner == owner]
        stored |= {(owner, i) for i in engine.get_many(ids, owner=owner)}
    ready = [(m, h) for m, h in parsed if (m.owner, m.id) not in stored]
    report.skipped = len(parsed) - len(ready)
    for start in range(0, len(ready), CHUNK):
        report.restored += engine.restore_memories(ready[start : start + CHUNK])
    return report


def _parse(engine: MemoryEngine, row: dict[str, Any]) -> tuple[Memory, list[MemoryVersion]]:
    """One exported memory, checked by the write path (limits, secrets, private spans)."""
    draft = engine.validate(
        MemoryInput(
            row["content"],
            MemoryType(row["type"]),
            row["owner"],
            row.get("agent"),
            row.get("session"),
            row["importance"],
            row.get("source"),
            row.get("metadata") or {},
            row.get("project"),  # absent from exports before the project scope: global
        )
    )
    created = _time(row["created_at"])
    memory = Memory(
        id=str(row["id"]),
        content=draft.content,
        type=draft.type,
        importance=draft.importance,
        owner=draft.owner,
        agent=draft.agent,
        session=draft.session,
        source=draft.source,
        created_at=created,
        updated_at=_time(row.get("updated_at")) or created,
        last_accessed_at=from_iso(row.get("last_accessed_at")),
        access_count=int(row.get("access_count") or 0),
        confirmations=int(row.get("confirmations") or 0),
        content_hash=draft.content_hash,
        status=Status(row.get("status") or "active"),
        metadata=draft.metadata,
        valid_to=from_iso(row.get("valid_to")),
        project=draft.project,
    )
    history = []
    for h in row.get("history") or []:
        text = engine.validate(MemoryInput(h["content"], draft.type, draft.owner)).content
        history.append(
            MemoryVersion(
                memory_id=memory.id,
                version=int(h["version"]),
                content=text,
                content_hash=content_hash(text),
                reason=ChangeReason(h["reason"]),
                replaced_at=_time(h["replaced_at"]),
            )
        )
    return memory, history


def _time(text: Any) -> Any:
    value = from_iso(text)
    if value is None:
        raise ValueError(f"not an ISO 8601 time: {text!r}")
    return value
