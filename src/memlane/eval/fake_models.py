"""Fake model servers on 127.0.0.1 for the real coding assistants, recording every request
(used by the real-client tests, ``tests/client_support.py``, and by ``memlane bench hooks``
for the added latency of a Claude Code turn):
Anthropic's Messages API (``POST /v1/messages``, streamed as Anthropic's SSE events or as one
JSON answer) for Claude Code, and the Gemini API (``:streamGenerateContent`` as SSE,
``:generateContent``, ``:countTokens``) for Gemini CLI. Each answers with a short fixed text;
the Gemini one can report a large prompt token count on chosen calls, which makes the real CLI
compress its history on its next turn in the same process (its own threshold check)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "Noted."


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]


@dataclass
class FakeModel:
    """A running fake server: ``url``, the ``requests`` it received (model calls only)."""

    kind: str
    server: ThreadingHTTPServer
    requests: list[Recorded] = field(default_factory=list)
    #: Gemini: the promptTokenCount to report on the next stream answers (then back to small).
    big_usage_next: int = 0
    #: A user message holding this text (key) is answered with a call of the tool (name,
    #: input) instead of text (the tool's result comes back in the next request): Anthropic's
    #: ``tool_use`` block, Gemini's ``functionCall`` part.
    tool_use_on: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    answered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{name}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def model_requests(self) -> list[Recorded]:
        """The requests that carry the conversation (Claude: /v1/messages with the main
        system prompt; Gemini: streamGenerateContent), in order."""
        if self.kind == "anthropic":
            return [r for r in self.requests if r.path.startswith("/v1/messages?") or
                    r.path == "/v1/messages"]  # fmt: skip
        if self.kind == "responses":  # OpenAI's Responses API (Codex CLI)
            return [r for r in self.requests if r.path.split("?")[0].endswith("/responses")]
        if self.kind == "chat":  # OpenAI chat completions (OpenCode, Copilot CLI, Qwen Code)
            return [r for r in self.requests if "/chat/completions" in r.path]
        return [r for r in self.requests if ":streamGenerateContent" in r.path]


def _sse(handler: BaseHTTPRequestHandler, events: list[tuple[str | None, dict[str, Any]]]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")  # the body ends when the connection does
    handler.end_headers()
    handler.close_connection = True
    for name, data in events:
        chunk = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
        handler.wfile.write(chunk.encode())
        handler.wfile.flush()


def _json(handler: BaseHTTPRequestHandler, data: dict[str, Any], status: int = 200) -> None:
    raw = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)


def _anthropic(fake: FakeModel, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    if "count_tokens" in h.path:
        _json(h, {"input_tokens": 100})
        return
    text = ANSWER
    if body.get("tools") is None and "summar" in json.dumps(body.get("messages", []))[-2000:]:
        text = "Summary: the user talked about the project."
    with fake.lock:
        fake.answered += 1  # a new id per answer: Claude Code groups its history by them
        number = fake.answered
    message = {
        "id": f"msg_fake_{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    said = users[-1].get("content") if users else None  # a system entry may come after it
    said = (
        said
        if isinstance(said, str)
        else " ".join(
            p.get("text", "") for p in said or [] if isinstance(p, dict) and p.get("type") == "text"
        )
    )
    tool = next((call for key, call in fake.tool_use_on.items() if key in said), None)
    if tool is not None and body.get("stream"):
        name, arguments = tool
        block = {"type": "tool_use", "id": f"toolu_fake_{number:04d}", "name": name, "input": {}}
        _sse(h, [
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "input_json_delta",
                                               "partial_json": json.dumps(arguments)}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"}),
        ])  # fmt: skip
        return
    if not body.get("stream"):
        done = {**message, "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
        _json(h, done)
        return
    _sse(h, [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ])  # fmt: skip


def _gemini(fake: FakeModel, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    if ":countTokens" in h.path:
        _json(h, {"totalTokens": 100})
        return
    text = ANSWER
    if ":generateContent" in h.path:  # the router, or a compression summary
        # what is asked is in the last message (the history before it may hold a snapshot
        # already: the router's calls must still get the router's JSON, or the CLI retries)
        last = (body.get("contents") or [{}])[-1]
        flat = json.dumps(last)
        if "state_snapshot" in flat or "summar" in flat.lower():
            text = "<state_snapshot>the user talked about the project</state_snapshot>"
        else:
            text = json.dumps({"reasoning": "simple", "model_choice": "flash"})
        _json(h, {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 5,
                              "totalTokenCount": 105},
        })  # fmt: skip
        return
    with fake.lock:
        tokens, fake.big_usage_next = (fake.big_usage_next or 100), 0
    parts: list[dict[str, Any]] = [{"text": text}]
    last = (body.get("contents") or [{}])[-1]
    said = " ".join(p.get("text", "") for p in last.get("parts") or [] if isinstance(p, dict))
    call = next((c for key, c in fake.tool_use_on.items() if key in said), None)
    if call is not None:  # a user's turn (a tool's answer has no text): call the tool
        parts = [{"functionCall": {"name": call[0], "args": call[1]}}]
    _sse(h, [(None, {
        "candidates": [{"content": {"role": "model", "parts": parts},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 1,
                          "totalTokenCount": tokens + 1},
    })])  # fmt: skip


def start(kind: str) -> FakeModel:
    """A fake ``anthropic``, ``gemini``, ``responses`` (OpenAI Responses API) or ``chat``
    (OpenAI chat completions: :mod:`memlane.eval.fake_openai`) server on a free loopback
    port, serving in a thread."""
    from memlane.eval import fake_openai

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_HEAD(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            if kind in {"chat", "responses"} and self.path.split("?")[0].endswith("/models"):
                fake_openai.models(self)
                return
            _json(self, {"error": {"message": "not found"}}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            fake.requests.append(Recorded(self.path, body))
            if kind == "responses":
                fake_openai.responses(fake, self, body)
            elif kind == "chat":
                fake_openai.chat(fake, self, body)
            else:
                (_anthropic if kind == "anthropic" else _gemini)(fake, self, body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake = FakeModel(kind, server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return fake
