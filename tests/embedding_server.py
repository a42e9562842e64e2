"""A real HTTP server on 127.0.0.1 that speaks the OpenAI ``/v1/embeddings`` wire format, for the
OpenAI-compatible embeddings provider's tests (driven by the real ``openai`` SDK), in the manner
of ``tests/llm_server.py``.

Vectors are :class:`memlane.HashEmbedder`'s (so texts that share words are near); a script of
steps, one per request, can answer otherwise: ``Status(code)``, ``Slow(seconds)``,
``WrongDimension()``; when it runs out, every request is answered normally.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memlane import HashEmbedder


@dataclass(frozen=True)
class Status:
    code: int


@dataclass(frozen=True)
class Slow:
    seconds: float


@dataclass(frozen=True)
class WrongDimension:
    pass


Step = Status | Slow | WrongDimension


@dataclass
class Script:
    dimension: int = 64
    steps: list[Step] = field(default_factory=list)
    #: Every request received: path, headers (lower-case names) and JSON body.
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_step(self, request: dict[str, Any]) -> Step | None:
        with self.lock:
            self.requests.append(request)
            return self.steps.pop(0) if self.steps else None

    @property
    def inputs(self) -> list[list[str]]:
        """The ``input`` list of each request, in order."""
        return [r["json"]["input"] for r in self.requests]


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("retry-after-ms", "10")  # the SDK's retry waits 10 ms
            self.end_headers()
            with suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            payload = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            step = script.next_step({"path": self.path, "headers": headers, "json": payload})
            if isinstance(step, Slow):
                time.sleep(step.seconds)
            if isinstance(step, Status):
                error = {"error": {"message": "scripted", "type": "server_error", "code": None}}
                self._send(step.code, error)
                return
            texts = payload["input"]
            dim = script.dimension + (1 if isinstance(step, WrongDimension) else 0)
            vectors = HashEmbedder(dim).embed_batch(texts)
            data = [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                for i, v in reversed(list(enumerate(vectors)))  # any order: the index counts
            ]
            usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
            body = {"object": "list", "data": data, "model": payload["model"], "usage": usage}
            self._send(200, body)

    return Handler


@contextmanager
def serve(script: Script) -> Iterator[str]:
    """Serve ``script`` on a free port of 127.0.0.1; yields the base URL (``.../v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
