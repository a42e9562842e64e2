"""Gemini CLI's request to its model, as memlane's ``BeforeModel`` hook reads and changes it.

Established from Gemini CLI 0.61.0 (its npm bundle; the same code in google-gemini/gemini-cli's
``packages/core``) and the real client against a fake model server (``tests/test_clients.py``):

- ``GeminiClient.sendMessageStream`` fires ``BeforeAgent`` once per prompt and adds its
  ``additionalContext`` to the user's turn as a ``<hook_context>`` part (``<`` and ``>``
  escaped); the part stays in the chat history.
- Then ``processTurn`` compresses the history when the last prompt's token count passes
  ``model.compressionThreshold`` (default 0.5) of the model's window
  (``ChatCompressionService.compress``: the oldest 70 % summarised into a
  ``<state_snapshot>``), on every call, the continuations after a tool call included: a
  compression takes memlane's blocks away after ``BeforeAgent`` has run.
- ``GeminiChat.makeApiCallAndProcessStream`` fires ``BeforeModel`` before each request to
  the model with ``llm_request`` (``{"model", "messages": [{"role", "content": str}],
  "config"}``: the text parts of each turn joined; turns without text left out). A hook's
  ``llm_request.messages`` are merged back into the request one by one, keeping the parts
  that are not text (``HookTranslatorGenAIv1.fromHookLLMRequest``), and reach that request
  only: the history stays as it was.

So the ``BeforeModel`` hook is where memlane sees a compression, and adds to that very request
the memories of the window it took away (:func:`with_block`). :func:`remembered_ids` reads
the session's transcript for the memories it stored through memlane's MCP ``remember``.
"""

from __future__ import annotations

from memlane import _fastjson as json
from memlane.hooks.transcript import INJECTION_PREFIX

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any

#: How Gemini CLI 0.61 wraps ``BeforeAgent``'s ``additionalContext`` in the user's turn
#: (``<hook_context>`` + the context with ``<`` and ``>`` escaped as ``&lt;`` and ``&gt;`` +
#: ``</hook_context>``: ``GeminiClient.sendMessageStream``, ``getAdditionalContext``).
HOOK_CONTEXT_START = "<hook_context>"
HOOK_CONTEXT_END = "</hook_context>"


def _escaped(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _unescaped(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">")


def with_block(request: Any, block: str) -> dict[str, Any] | None:
    """Gemini CLI's ``BeforeModel`` ``llm_request`` change that adds ``block`` to its last
    user message, wrapped as ``BeforeAgent``'s context is (``<hook_context>``, ``<``/``>``
    escaped): ``{"messages": [...]}``, every message as it came (Gemini CLI 0.61 merges the
    hook's messages back into the request one by one, keeping the parts that are not text:
    ``HookTranslatorGenAIv1.fromHookLLMRequest``), or ``None`` when the request has no user
    message with text. The change reaches this request only: Gemini CLI does not keep it
    in its history."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list):
        return None
    for n in range(len(messages) - 1, -1, -1):
        message = messages[n]
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, str):
            return None
        added = f"{content}{HOOK_CONTEXT_START}{_escaped(block)}{HOOK_CONTEXT_END}"
        return {"messages": [*messages[:n], {**message, "content": added}, *messages[n + 1 :]]}
    return None


def memlane_blocks(request: Any) -> str:
    """The memlane blocks (from ``[Context from memory]`` to the end of their
    ``<hook_context>`` part, or of the message; ``&lt;`` and ``&gt;`` read back as ``<`` and
    ``>``) in Gemini CLI's ``BeforeModel`` ``llm_request`` (``{"messages": [{"role",
    "content": str}], ...}``), one per line group; ``""`` when there is none or the request is
    not shaped so (only what the sync needs travels to the server, not the whole
    conversation)."""
    messages = request.get("messages") if isinstance(request, dict) else None
    found: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            continue
        start = content.find(INJECTION_PREFIX)
        while start >= 0:
            end = content.find(HOOK_CONTEXT_END, start)
            end = len(content) if end < 0 else end
            found.append(_unescaped(content[start:end]))
            start = content.find(INJECTION_PREFIX, end)
    return "\n\n".join(found)


def remembered_ids(path: str | None) -> list[str]:
    """Ids of the memories this Gemini CLI session stored through memlane's MCP ``remember``
    tool and the model still has: Gemini CLI's counterpart of
    :func:`memlane.hooks.transcript.remembered_ids`. Never raises.

    Gemini CLI 0.61's transcript (``transcript_path``, JSONL; checked against real sessions)
    holds a header, message records (``{"id", "type": "user"|"gemini", "content": [parts],
    "toolCalls": [...]}``, a record again when a message changes) and ``{"$set": {"messages":
    [...]}}`` records that replace the whole list with the chat history as it is, written on
    resume and after a compression (``ChatRecordingService.updateMessagesFromHistory``). The
    model's view is the last such list and the records after it, so a call a compression
    summarised away no longer counts. The tool's answer is a ``functionResponse`` part (in the
    user message's ``content`` and in the call's ``toolCalls[].result``) named
    ``mcp_<server>_remember`` of a server whose name holds ``memlane``; its
    ``response.output`` is the tool's JSON (``WriteResult.to_dict()``, wrapped in
    ``<untrusted_context>``), the memory's id under ``memory``."""
    from memlane.hooks.transcript import _remembered_id, _tail

    entries, _ = _tail(path)
    view: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        update = entry.get("$set")
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            view = {str(m.get("id")): m for m in update["messages"] if isinstance(m, dict)}
        elif "id" in entry and "type" in entry:
            view[str(entry["id"])] = entry
    ids: list[str] = []
    for message in view.values():
        parts = message.get("content")
        found = list(parts) if isinstance(parts, list) else []
        calls = message.get("toolCalls")
        for call in calls if isinstance(calls, list) else []:
            result = call.get("result") if isinstance(call, dict) else None
            found += result if isinstance(result, list) else []
        for part in found:
            memory_id = _remembered_id(_answer(part))
            if memory_id is not None and memory_id not in ids:
                ids.append(memory_id)
    return ids


def _answer(part: Any) -> Any:
    """The JSON answer of memlane's ``remember`` in one part (``None`` when the part is not
    one: another tool, or not a ``functionResponse``)."""
    answer = part.get("functionResponse") if isinstance(part, dict) else None
    name = str(answer.get("name") or "") if isinstance(answer, dict) else ""
    if not (name.startswith("mcp_") and name.endswith("_remember") and "memlane" in name):
        return None
    response = answer.get("response") if isinstance(answer, dict) else None
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, str) or "{" not in output:
        return None
    try:  # the JSON inside <untrusted_context> ... </untrusted_context>
        return json.loads(output[output.index("{") : output.rindex("}") + 1])
    except ValueError:
        return None
