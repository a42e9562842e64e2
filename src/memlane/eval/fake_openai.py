"""OpenAI's two wire formats for the fake model servers of :mod:`memlane.eval.fake_models`:

- the Responses API (``POST /v1/responses``, streamed as its SSE events) for Codex CLI, whose
  chat-completions wire is gone;
- chat completions (``POST /v1/chat/completions``, streamed as ``chat.completion.chunk`` SSE
  lines or one JSON answer) for OpenCode, Copilot CLI and Qwen Code with a custom
  OpenAI-compatible provider; ``GET /v1/models`` lists one model.

Each answers with a short fixed text, a summary when asked to summarise (a client's compaction),
or a call of the tool named in :attr:`FakeModel.tool_use_on` when the last user message holds
its key. ``big_usage_next`` reports that many input tokens on the next answer (a client
compacts on its own threshold check).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.eval.fake_models import FakeModel

SUMMARY = "Summary: the user talked about the project."


def _text_of(value: Any) -> str:
    """Every string under ``value`` (a message's content, parts, items), joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return " ".join(_text_of(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_text_of(v) for v in value)
    return ""


def _summarising(text: str) -> bool:
    low = text.lower()
    return "summar" in low and ("conversation" in low or "checkpoint" in low)


def _next_id(fake: FakeModel) -> tuple[int, int]:
    with fake.lock:
        fake.answered += 1
        tokens, fake.big_usage_next = (fake.big_usage_next or 100), 0
        return fake.answered, tokens


def _sse_lines(h: BaseHTTPRequestHandler, events: list[tuple[str | None, Any]]) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Cache-Control", "no-cache")
    h.send_header("Connection", "close")
    h.end_headers()
    h.close_connection = True
    for name, data in events:
        raw = data if isinstance(data, str) else json.dumps(data)
        chunk = (f"event: {name}\n" if name else "") + f"data: {raw}\n\n"
        h.wfile.write(chunk.encode())
        h.wfile.flush()


def _send_json(h: BaseHTTPRequestHandler, data: dict[str, Any], status: int = 200) -> None:
    raw = json.dumps(data).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(raw)))
    h.end_headers()
    h.wfile.write(raw)


# ------------------------------------------------------------------------------ Responses API
def responses(fake: FakeModel, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    """``POST /v1/responses`` (streamed): a message, or a ``function_call`` item."""
    items = body.get("input") or []
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    said = _text_of(users[-1].get("content")) if users else ""
    last = items[-1] if items and isinstance(items[-1], dict) else {}
    number, tokens = _next_id(fake)
    rid = f"resp_fake_{number:04d}"
    text = SUMMARY if _summarising(_text_of(last)) else "Noted."
    tool = None
    at = max((n for n, i in enumerate(items) if isinstance(i, dict) and i.get("role") == "user"),
             default=-1)  # fmt: skip
    answered = any(isinstance(i, dict) and i.get("type", "").endswith("_output")
                   for i in items[at + 1 :])  # fmt: skip
    if at >= 0 and not answered:  # a user's turn (a tool's output comes back after it)
        tool = next((c for key, c in fake.tool_use_on.items() if key in said), None)
    if tool is not None:
        item: dict[str, Any] = {
            "type": "function_call", "id": f"fc_fake_{number:04d}",
            "call_id": f"call_fake_{number:04d}", "name": tool[0],
            "arguments": json.dumps(tool[1]), "status": "completed",
        }  # fmt: skip
        for spec in body.get("tools") or []:  # Codex groups an MCP server's tools in a
            space = str(spec.get("name") or "")  # namespace: {"namespace", "name"} calls one
            if spec.get("type") == "namespace" and tool[0].startswith(space + "__"):
                item.update(namespace=space, name=tool[0][len(space) + 2 :])
    else:
        item = {
            "type": "message", "id": f"msg_fake_{number:04d}", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }  # fmt: skip
    usage = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1,
             "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    base = {"id": rid, "object": "response", "model": body.get("model", "fake"),
            "status": "in_progress", "output": []}  # fmt: skip
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "response": base}),
        ("response.output_item.added",
         {"type": "response.output_item.added", "output_index": 0, "item": item}),
    ]  # fmt: skip
    if tool is None:
        events.append(("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
            "content_index": 0, "delta": text}))  # fmt: skip
    events += [
        ("response.output_item.done",
         {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": {
            **base, "status": "completed", "output": [item], "usage": usage}}),
    ]  # fmt: skip
    _sse_lines(h, events)


# ------------------------------------------------------------------------------ chat completions
def chat(fake: FakeModel, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    """``POST /v1/chat/completions``: a text, or a ``tool_calls`` answer; streamed when asked."""
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    number, tokens = _next_id(fake)
    said = _text_of(last.get("content")) if last.get("role") == "user" else ""
    text = SUMMARY if _summarising(_text_of(last.get("content"))) else "Noted."
    if "<state_snapshot>" in said:  # Qwen Code's compression keeps only a state snapshot
        text = "<state_snapshot>the user talked about the project</state_snapshot>"
    tool = next((c for key, c in fake.tool_use_on.items() if key in said), None)
    cid = f"chatcmpl-fake{number:04d}"
    usage = {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1}
    calls = None
    if tool is not None:
        calls = [{"index": 0, "id": f"call_fake_{number:04d}", "type": "function",
                  "function": {"name": tool[0], "arguments": json.dumps(tool[1])}}]  # fmt: skip
    finish = "tool_calls" if calls else "stop"
    model = body.get("model", "fake")
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else text}
        if calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
        _send_json(h, {"id": cid, "object": "chat.completion", "created": 0, "model": model,
                       "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                       "usage": usage})  # fmt: skip
        return
    delta: dict[str, Any] = {"role": "assistant"}
    delta.update({"tool_calls": calls} if calls else {"content": text})

    def chunk(d: dict[str, Any], reason: str | None, **more: Any) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": d, "finish_reason": reason}], **more}  # fmt: skip

    _sse_lines(h, [
        (None, chunk(delta, None)),
        (None, chunk({}, finish)),
        (None, {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [], "usage": usage}),
        (None, "[DONE]"),
    ])  # fmt: skip


def models(h: BaseHTTPRequestHandler) -> None:
    """``GET /v1/models``: one model, ``fake-model``."""
    _send_json(h, {"object": "list", "data": [
        {"id": "fake-model", "object": "model", "created": 0, "owned_by": "memlane"}]})  # fmt: skip
