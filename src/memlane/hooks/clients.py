"""Each coding assistant's hook calls as one shape: the event adapters.

A client's hook names its events and payload keys its own way and reads injected context from
its own output field; memlane's hook (:mod:`memlane.hooks.run`) acts on Claude Code's names.
:func:`adapt` maps a client's event and payload onto them, :func:`output` writes the line the
client reads, :func:`max_chars` is the longest block the client passes whole. Nothing here
decides what to inject: every client goes through the same engine call.

=================  ===================================================================
client             what differs (checked against the real clients, tests/test_clients_*)
=================  ===================================================================
``claude-code``    the reference shape
``gemini``         its own event names (``BeforeAgent`` ...), same payload keys
``codex``          Claude Code's names and keys; ``PostCompact`` after a real compaction;
                   the block stays under :data:`CODEX_MAX_CHARS`
``qwen``           Claude Code's names and keys
``copilot``        camelCase events (``userPromptSubmitted``, ``sessionStart``,
                   ``preCompact``, ``sessionEnd``) and keys (``sessionId``,
                   ``transcriptPath``); context read from a top-level ``additionalContext``
``opencode``       its plugin (:mod:`memlane.hooks.opencode`) sends Claude Code's shape
=================  ===================================================================
"""

from __future__ import annotations

from memlane import _fastjson as json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any

#: Every client the hook knows.
CLIENTS = ("claude-code", "gemini", "codex", "qwen", "copilot", "opencode")
#: The longest ``additionalContext`` Claude Code passes whole (observed with 2.1.197: exactly
#: 10,000 characters arrive; at 10,001 a short "Output too large" preview replaces them).
CLAUDE_CODE_MAX_CHARS = 10_000
#: The longest ``additionalContext`` memlane gives Codex, in characters: Codex 0.171 moves a
#: hook's context over ~2,500 tokens out of the prompt into a file the model must open (its
#: ``output_spill``), so the block stays below that (~4 characters a token, and a margin).
CODEX_MAX_CHARS = 8_000
#: Copilot CLI's events, as Claude Code names them.
COPILOT_EVENTS = {
    "userPromptSubmitted": "UserPromptSubmit",
    "sessionStart": "SessionStart",
    "preCompact": "PreCompact",
    "sessionEnd": "SessionEnd",
    "agentStop": "Stop",
}
#: Copilot CLI's payload keys, as Claude Code names them.
COPILOT_KEYS = {"sessionId": "session_id", "transcriptPath": "transcript_path"}


def adapt(client: str, event: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(event, payload)`` of ``client``'s hook call in Claude Code's names (the payload's
    other keys kept as they came)."""
    if client != "copilot":
        return event, payload
    out = dict(payload)
    for theirs, ours in COPILOT_KEYS.items():
        if theirs in out and ours not in out:
            out[ours] = out.pop(theirs)
    session = out.get("session_id")
    if "transcript_path" not in out and isinstance(session, str) and session.strip():
        from memlane.hooks.copilot import events_path  # no path in its payloads

        out["transcript_path"] = events_path(session)
    return COPILOT_EVENTS.get(event, event), out


def output(client: str, event: str, block: str) -> str:
    """The exact JSON line ``client`` reads injected context from: Copilot CLI a top-level
    ``additionalContext`` (a ``hookSpecificOutput`` is ignored there); the others
    ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`` (unknown keys or a bare
    object fail Claude Code's validation: INTEGRATIONS.md)."""
    if client == "copilot":
        return json.dumps({"additionalContext": block}, ensure_ascii=False)
    payload = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": block}}
    return json.dumps(payload, ensure_ascii=False)


def max_chars(client: str, configured: int) -> int:
    """The block's budget for ``client``: ``configured`` (``[hooks] max_chars``), at most what
    the client passes whole (Claude Code :data:`CLAUDE_CODE_MAX_CHARS`; Codex
    :data:`CODEX_MAX_CHARS`, below its ~2,500-token spill)."""
    if client == "claude-code":
        return min(configured, CLAUDE_CODE_MAX_CHARS)
    if client == "codex":
        return min(configured, CODEX_MAX_CHARS)
    return configured


#: The payload key holding the client's own id of the user's turn: Qwen Code fires
#: ``UserPromptSubmit`` again on the continuations after a tool's result with the same
#: ``prompt_id``; Codex sends ``turn_id``; memlane's OpenCode plugin the user message's
#: ``messageID`` as ``message_id``. Every client's prompt asks the turn model
#: (:meth:`memlane.MemoryEngine.turn`, ``kept=True``); with this id the turn is decided once
#: and a later call of it is a repeat (nothing printed: the block is already in the history).
#: Claude Code, Gemini CLI and Copilot CLI send no turn id: their turn is (session, prompt),
#: and the same prompt again right after is the same turn (its block is in the history).
TURN_KEYS = {"qwen": "prompt_id", "codex": "turn_id", "opencode": "message_id"}


def turn_id(client: str, payload: dict[str, Any]) -> str | None:
    """The client's id of this user turn (``None``: the client sends none), prefixed with
    the client's name."""
    name = TURN_KEYS.get(client)
    found = payload.get(name) if name else None
    return f"{client}:{found}" if isinstance(found, str) and found.strip() else None
