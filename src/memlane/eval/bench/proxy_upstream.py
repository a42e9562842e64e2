"""A fake model server speaking the OpenAI (chat completions, Responses, models) and Anthropic
(Messages, count_tokens, models) wire formats, JSON and SSE, for ``memlane bench proxy`` and the
proxy's tests: it records every request as received (method, path, headers, raw body) and
answers scripted replies. :func:`serve_in_thread` runs an ASGI app with uvicorn on a free
loopback port in a thread. Imported only by the bench command and the tests."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Seen:
    """One request the fake upstream received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Upstream:
    """The fake's script: ``status`` (answer this status with an error body and
    ``retry-after: 7`` instead, when not 200), ``event_delay_s`` between SSE events, ``events``
    (text deltas per streamed answer); ``seen`` the requests, ``cancelled`` how many streamed
    answers were cut off by the client going away."""

    status: int = 200
    event_delay_s: float = 0.0
    events: int = 3
    seen: list[Seen] = field(default_factory=list)
    #: The bytes of each streamed answer, as sent.
    sent: list[bytes] = field(default_factory=list)
    cancelled: int = 0
    finished: int = 0
    count: int = 0

    def reset(self) -> None:
        """Back to the default script, nothing seen."""
        self.status, self.event_delay_s, self.events = 200, 0.0, 3
        self.seen.clear()
        self.sent.clear()
        self.cancelled = self.finished = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
            ]
        )

    async def _record(self, request: Request) -> tuple[dict[str, Any], Response | None]:
        raw = await request.body()
        self.seen.append(Seen(request.method, request.url.path, dict(request.headers), raw))
        self.count += 1
        if self.status != 200:
            error = {"error": {"type": "rate_limit_error", "message": "slow down (fake)"}}
            return {}, JSONResponse(error, self.status, headers={"retry-after": "7"})
        return (json.loads(raw) if raw else {}), None

    def _stream(self, events: list[str]) -> StreamingResponse:
        async def gen() -> AsyncIterator[bytes]:
            try:
                for event in events:
                    yield event.encode("utf-8")
                    if self.event_delay_s:
                        await asyncio.sleep(self.event_delay_s)
                self.finished += 1
                self.sent.append("".join(events).encode("utf-8"))
            except BaseException:
                self.cancelled += 1
                raise

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def chat(self, request: Request) -> Response:
        body, error = await self._record(request)
        if error is not None:
            return error
        n, model = self.count, body.get("model", "fake")
        base = {"id": f"chatcmpl-{n}", "created": 1, "model": model}
        if not body.get("stream"):
            message = {"role": "assistant", "content": f"reply {n}"}
            return JSONResponse(
                {**base, "object": "chat.completion", "choices": [
                    {"index": 0, "message": message, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
            )  # fmt: skip
        chunk = {**base, "object": "chat.completion.chunk"}
        events = [
            "data: " + json.dumps({**chunk, "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": f"part{i} "},
                 "finish_reason": None}]}) + "\n\n"
            for i in range(self.events)
        ]  # fmt: skip
        done = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        events += ["data: " + json.dumps(done) + "\n\n", "data: [DONE]\n\n"]
        return self._stream(events)

    async def responses(self, request: Request) -> Response:
        body, error = await self._record(request)
        if error is not None:
            return error
        n = self.count
        text = f"reply {n}"
        message = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
        answer = {
            "id": f"resp_{n}", "object": "response", "created_at": 1, "status": "completed",
            "model": body.get("model", "fake"), "output": [message], "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "usage": {"input_tokens": 5, "output_tokens": 2,
            "total_tokens": 7, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}},
        }  # fmt: skip
        if not body.get("stream"):
            return JSONResponse(answer)
        started = {**answer, "status": "in_progress", "output": []}
        events = [_sse("response.created", {"type": "response.created", "response": started,
                                            "sequence_number": 0})]  # fmt: skip
        for i in range(self.events):
            events.append(_sse("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": f"msg_{n}", "output_index": 0,
                "content_index": 0, "delta": f"part{i} ", "sequence_number": i + 1,
                "logprobs": []}))  # fmt: skip
        events.append(_sse("response.completed", {"type": "response.completed",
                                                  "response": answer,
                                                  "sequence_number": self.events + 1}))  # fmt: skip
        return self._stream(events)

    async def models(self, request: Request) -> Response:
        _, error = await self._record(request)
        if error is not None:
            return error
        return JSONResponse({"object": "list", "data": [
            {"id": "fake-model", "object": "model", "created": 1, "owned_by": "fake"}]})  # fmt: skip

    async def count_tokens(self, request: Request) -> Response:
        body, error = await self._record(request)
        if error is not None:
            return error
        return JSONResponse({"input_tokens": len(json.dumps(body)) // 4})

    async def messages(self, request: Request) -> Response:
        body, error = await self._record(request)
        if error is not None:
            return error
        n, model = self.count, body.get("model", "fake")
        usage = {"input_tokens": 5, "output_tokens": 2}
        message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model,
                   "content": [{"type": "text", "text": f"reply {n}"}], "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": usage}  # fmt: skip
        if not body.get("stream"):
            return JSONResponse(message)
        events = [
            _sse("message_start", {"type": "message_start", "message": {**message,
                 "content": [], "stop_reason": None}}),
            _sse("content_block_start", {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "text", "text": ""}}),
            *[_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": f"part{i} "}})
              for i in range(self.events)],
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                 "stop_sequence": None}, "usage": {"output_tokens": 2}}),
            _sse("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        return self._stream(events)


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yields its base URL
    (``http://127.0.0.1:PORT``) once it accepts connections; stopped at the end."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def main(argv: list[str]) -> None:
    """``python -m memlane.eval.bench.proxy_upstream PORT [EVENT_DELAY_MS]``: the fake upstream
    alone on 127.0.0.1:PORT (``memlane bench proxy`` runs it in a process of its own)."""
    delay = float(argv[1]) / 1000.0 if len(argv) > 1 else 0.0
    uvicorn.run(
        Upstream(event_delay_s=delay).app(), host="127.0.0.1", port=int(argv[0]),
        log_level="warning", access_log=False,
    )  # fmt: skip


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
