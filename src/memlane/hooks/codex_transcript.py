"""Codex CLI's session file (``transcript_path``: its rollout JSONL), as memlane's hook reads it.

Checked with Codex 0.171.0 against real sessions (``tests/test_clients_codex.py``): each line
is ``{"timestamp", "type", "payload"}``; ``type`` ``response_item`` holds what the model sees
(``payload.type`` ``message`` with ``role`` and ``content`` parts of ``input_text`` /
``output_text``; ``function_call`` with ``call_id``, ``name`` and, for an MCP server's tool,
``namespace`` ``mcp__<server>``; ``function_call_output`` with ``call_id`` and ``output``, the
tool's JSON after a ``Wall time ... Output:`` preamble); ``type`` ``compacted`` marks a
compaction: the model's view starts again there.
"""

from __future__ import annotations

from memlane import _fastjson as json
from memlane.hooks.transcript import _tail, remembered_in_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any


def _items(path: str | None) -> list[dict[str, Any]]:
    """The ``response_item`` payloads after the transcript tail's last compaction."""
    entries, _ = _tail(path)
    items: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "compacted":
            items = []
        payload = entry.get("payload")
        if entry.get("type") == "response_item" and isinstance(payload, dict):
            items.append(payload)
    return items


def _is_remember(item: dict[str, Any]) -> bool:
    name = f"{item.get('namespace') or ''}__{item.get('name') or ''}"
    return name.endswith("__remember") and "memlane" in name


def remembered_ids(path: str | None) -> list[str]:
    """Ids of the memories this Codex session stored through memlane's MCP ``remember``
    (a ``function_call`` of a ``mcp__<server>`` namespace whose name holds ``memlane``, and
    its ``function_call_output``: ``WriteResult.to_dict()`` as JSON), since the last
    compaction. Never raises."""
    calls: set[str] = set()
    ids: list[str] = []
    for item in _items(path):
        kind = item.get("type")
        if kind == "function_call" and _is_remember(item):
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output" and str(item.get("call_id")) in calls:
            output = item.get("output")
            found = remembered_in_text(output if isinstance(output, str) else json.dumps(output))
            if found is not None and found not in ids:
                ids.append(found)
    return ids


def recent_messages(path: str | None, count: int, *, prompt: str = "") -> list[str]:
    """The last ``count`` user and assistant messages of the session (``"user: ..."``),
    oldest first, Codex's own context messages (``<environment_context>`` ...) and the
    current ``prompt`` left out. Never raises."""
    if count <= 0:
        return []
    out: list[str] = []
    for item in _items(path):
        role = item.get("role")
        if item.get("type") != "message" or role not in {"user", "assistant"}:
            continue
        parts = item.get("content")
        text = " ".join(
            str(p.get("text") or "") for p in parts if isinstance(p, dict)
        ) if isinstance(parts, list) else ""  # fmt: skip
        text = " ".join(text.split())
        if text and not text.startswith("<"):
            out.append(f"{role}: {text[:500]}")
    if out and out[-1] == f"user: {' '.join(prompt.split())[:500]}":
        out.pop()
    return out[-count:]
