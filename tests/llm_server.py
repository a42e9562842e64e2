"""Real HTTP servers on 127.0.0.1 that speak the OpenAI chat-completions and the Anthropic
messages wire formats, answering from a script, for the providers' tests (driven by the real
``openai`` and ``anthropic`` SDKs).

A script is a list of steps, one per request, in order; when it runs out, ``default`` answers.
Steps: ``Reply(text)`` (a normal answer whose message text is ``text``), ``Slow(seconds, text)``,
``Held(text)`` (answered only once the test calls ``release()``, or after ``cap_s``: ordering
tests assert what happened while the answer was held, without wall-clock bounds),
``Status(code)`` (an API error with that HTTP status), ``Raw(body)`` (a 200 with that body),
``Refuse(code, message)``, ``Die()`` (the connection closed without an answer, as a crashed
server does).

A script's ``refuse`` maps a structured-output *form* to the refusal a real server sends for it
(:data:`LLAMA_CPP`, :data:`TEXT_ONLY`, :data:`NO_TOOLS`, :data:`NO_TOOLS_NO_PREFILL`): a request
in that form is refused without using a step. The form of a request: OpenAI's
``response_format.type`` (``text`` without one); Anthropic's ``tool_use`` (tools sent),
``prefill`` (the last message is the assistant's) or ``text``. Answers follow the form: a forced
tool call answers a ``tool_use`` block whose input is the reply's JSON; a prefilled answer
continues after the ``{`` it was given.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal["openai", "anthropic"]
TOKENS_IN, TOKENS_OUT = 11, 7


@dataclass(frozen=True)
class Reply:
    text: str


@dataclass(frozen=True)
class Slow:
    seconds: float
    text: str


@dataclass(frozen=True)
class Held:
    """An answer held back until :meth:`release` (or ``cap_s`` seconds, so a broken test ends);
    ``answered`` is set once the server has sent it."""

    text: str
    cap_s: float = 30.0
    released: threading.Event = field(default_factory=threading.Event)
    answered: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


@dataclass(frozen=True)
class Status:
    code: int


@dataclass(frozen=True)
class Raw:
    body: str


@dataclass(frozen=True)
class Refuse:
    """An API error with that HTTP status and message."""

    code: int
    message: str


@dataclass(frozen=True)
class Die:
    """The server reads the request and closes the connection without answering."""


Step = Reply | Slow | Held | Status | Raw | Refuse | Die

#: llama-cpp-python 0.3.36's server, asked for ``response_format`` ``json_schema`` (its body's
#: ``error.message``, as it answered it on this machine, less the traceback it appends).
LLAMA_CPP_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}"
)
LLAMA_CPP = {"json_schema": Refuse(500, LLAMA_CPP_REFUSAL)}
#: A server that takes no ``response_format`` at all.
TEXT_ONLY = {
    "json_schema": Refuse(400, "response_format is not supported by this server"),
    "json_object": Refuse(400, "response_format is not supported by this server"),
}
#: Anthropic-compatible servers without tools, and without an assistant prefill either.
NO_TOOLS = {"tool_use": Refuse(400, "tools: this server does not support tool use")}
NO_TOOLS_NO_PREFILL = {
    **NO_TOOLS,
    "prefill": Refuse(400, "the final message must be from the user (no assistant prefill)"),
}


@dataclass
class Script:
    kind: Kind
    steps: list[Step] = field(default_factory=list)
    default: Step = field(default_factory=lambda: Status(500))
    #: Forms this server refuses, and how (see the module's docstring).
    refuse: dict[str, Refuse] = field(default_factory=dict)
    #: Every request received: path, headers (lower-case names) and JSON body.
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_step(self, request: dict[str, Any]) -> Step:
        with self.lock:
            self.requests.append(request)
            refusal = self.refuse.get(form_of(self.kind, request["json"]))
            if refusal is not None:
                return refusal
            return self.steps.pop(0) if self.steps else self.default


def form_of(kind: Kind, payload: dict[str, Any]) -> str:
    """The structured-output form a request asks in (see the module's docstring)."""
    if kind == "openai":
        return str((payload.get("response_format") or {}).get("type", "text"))
    if payload.get("tools"):
        return "tool_use"
    messages = payload.get("messages") or [{}]
    return "prefill" if messages[-1].get("role") == "assistant" else "text"


def _body(kind: Kind, text: str, model: str, form: str = "text") -> dict[str, Any]:
    if kind == "openai":
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": TOKENS_IN,
                "completion_tokens": TOKENS_OUT,
                "total_tokens": TOKENS_IN + TOKENS_OUT,
            },
        }
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_anthropic_block(text, form)],
        "stop_reason": "tool_use" if form == "tool_use" else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": TOKENS_IN, "output_tokens": TOKENS_OUT},
    }


def _anthropic_block(text: str, form: str) -> dict[str, Any]:
    if form == "tool_use":  # the forced tool's input: the reply's JSON object
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        given = value if isinstance(value, dict) else {"unparsed": text}
        return {"type": "tool_use", "id": "toolu_1", "name": "answer", "input": given}
    if form == "prefill" and text.startswith("{"):  # it continues after the prefilled "{"
        text = text[1:]
    return {"type": "text", "text": text}


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, body: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("retry-after-ms", "10")  # the SDKs' retry waits 10 ms, not seconds
            self.end_headers()
            with suppress(BrokenPipeError, ConnectionResetError):  # the client timed out, left
                self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            payload = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            step = script.next_step({"path": self.path, "headers": headers, "json": payload})
            model = str(payload.get("model", "?"))
            form = form_of(script.kind, payload)
            if isinstance(step, Die):
                self.close_connection = True
                return
            if isinstance(step, Slow):
                time.sleep(step.seconds)
                step = Reply(step.text)
            held = step if isinstance(step, Held) else None
            if held is not None:
                held.released.wait(held.cap_s)
                step = Reply(held.text)
            if isinstance(step, Reply):
                self._send(200, json.dumps(_body(script.kind, step.text, model, form)))
            elif isinstance(step, Raw):
                self._send(200, step.body)
            elif isinstance(step, Refuse):
                error = {"type": "error", "error": {"type": "invalid", "message": step.message}}
                self._send(step.code, json.dumps(error))
            else:
                error = {"type": "error", "error": {"type": "api_error", "message": "scripted"}}
                self._send(step.code, json.dumps(error))
            if held is not None:
                held.answered.set()

    return Handler


@contextmanager
def serve(script: Script) -> Iterator[str]:
    """Serve ``script`` on a free port of 127.0.0.1; yields the base URL for the SDK."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    host, port = server.server_address[:2]
    root = f"http://{host!s}:{port}"
    try:
        yield f"{root}/v1" if script.kind == "openai" else root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
