"""GitHub Copilot CLI's session file, as memlane's hook reads it.

Copilot CLI 1.0.102's hook payloads carry no transcript path; it keeps each session's events in
``$COPILOT_HOME/session-state/<sessionId>/events.jsonl`` (``COPILOT_HOME`` default
``~/.copilot``; checked against real sessions, ``tests/test_clients_copilot.py``): JSONL
``{"type", "data"}``; an ``assistant.message`` lists its ``toolRequests`` (``toolCallId``,
``mcpServerName``, ``mcpToolName``); a ``tool.execution_complete`` holds the call's
``result.content`` (memlane's JSON answer).
"""

from __future__ import annotations

import os

from memlane.hooks.transcript import _tail, remembered_in_text


def events_path(session: str) -> str:
    """The events file of Copilot CLI session ``session``."""
    home = os.environ.get("COPILOT_HOME") or os.path.join(os.path.expanduser("~"), ".copilot")
    return os.path.join(home, "session-state", os.path.basename(session), "events.jsonl")


def remembered_ids(path: str | None) -> list[str]:
    """Ids of the memories this Copilot CLI session stored through memlane's MCP ``remember``
    (a tool request of an MCP server whose name holds ``memlane``, tool ``remember``, and its
    completed execution), since the session's last completed compaction. Never raises."""
    entries, _ = _tail(path)
    calls: set[str] = set()
    ids: list[str] = []
    for entry in entries:
        kind = str(entry.get("type") or "") if isinstance(entry, dict) else ""
        data = entry.get("data") if isinstance(entry, dict) else None
        if not isinstance(data, dict):
            continue
        if "compact" in kind and "complete" in kind:
            ids, calls = [], set()
        if kind == "assistant.message":
            for request in data.get("toolRequests") or []:
                if not isinstance(request, dict):
                    continue
                server = str(request.get("mcpServerName") or "")
                if "memlane" in server and request.get("mcpToolName") == "remember":
                    calls.add(str(request.get("toolCallId")))
        elif kind == "tool.execution_complete" and str(data.get("toolCallId")) in calls:
            result = data.get("result")
            found = remembered_in_text(result.get("content") if isinstance(result, dict) else None)
            if found is not None and found not in ids:
                ids.append(found)
    return ids
