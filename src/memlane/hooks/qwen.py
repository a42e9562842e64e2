"""Qwen Code's session file (``transcript_path``), as memlane's hook reads it.

Checked with Qwen Code 0.24.4 against real sessions (``tests/test_clients_qwen.py``): JSONL
records ``{"uuid", "sessionId", "type": "user"|"assistant"|"tool_result"|"system", "message":
{"role", "parts": [...]}}``; a tool's call is a ``functionCall`` part (``name``
``mcp__<server>__<tool>``), its answer a ``functionResponse`` part of a ``tool_result``
record, ``response.output`` the tool's text (memlane's JSON first); a compression writes a
``system`` record whose ``subtype`` names it, after which the model sees its snapshot only.
"""

from __future__ import annotations

from memlane import _fastjson as json
from memlane.hooks.transcript import _remembered_id, _tail

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any


def _answer(part: Any) -> Any:
    """memlane's ``remember`` JSON answer in one part (``None``: another part)."""
    answer = part.get("functionResponse") if isinstance(part, dict) else None
    name = str(answer.get("name") or "") if isinstance(answer, dict) else ""
    if not (name.endswith("__remember") and "memlane" in name):
        return None
    response = answer.get("response") if isinstance(answer, dict) else None
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, str) or "{" not in output:
        return None
    try:
        return json.JSONDecoder().raw_decode(output[output.index("{") :])[0]
    except ValueError:
        return None


def remembered_ids(path: str | None) -> list[str]:
    """Ids of the memories this Qwen Code session stored through memlane's MCP ``remember``
    since its last compression. Never raises."""
    entries, _ = _tail(path)
    ids: list[str] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "system" and "compress" in str(entry.get("subtype") or ""):
            ids = []
        message = entry.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            found = _remembered_id(_answer(part))
            if found is not None and found not in ids:
                ids.append(found)
    return ids
