"""A fake OpenAI-compatible model server for the framework tests (tests/test_fw_*.py).

:class:`FakeModel` serves ``POST /v1/chat/completions`` (plain JSON or ``stream: true`` as
server-sent events) on a free 127.0.0.1 port in a thread and records every request body, so a
test drives the framework's real agent and asserts on what the model received. Its script makes
each user turn a tool loop of two model calls: when the last message is the user's and the
request offers the tool named :attr:`FakeModel.tool`, it answers with a call to that tool; when
the last message is a tool result, it answers with plain text. So one turn = two model calls, the
second holding the tool's result (what a tool-using agent does).

Helpers: :func:`request_text` (every text the model sees in one request: system / developer /
user / assistant / tool contents) and :func:`memory_counts` (how many times each memory's text is
in it); :func:`memlane_at`, :func:`tell_secrets` and :func:`check_secrets_off_disk` (a user's
secrets and ``<private>`` text through an adapter, then a byte scan of the home with
tests/privacy_support.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memlane import HashEmbedder, MemoryEngine, Settings
from memlane.history import INJECTION_BLOCK_PREFIX
from memlane.integrations import connect
from memlane.store import open_store
from privacy_support import files_holding, leaks, text_of

#: The repository (its .venv runs :func:`memlane_serve`).
ROOT = Path(__file__).resolve().parents[1]
#: The tool every framework test registers; the fake model calls it once per user turn.
TOOL = "lookup"
#: What the fake model answers at the end of a turn (after the tool's result).
FINAL = "All done."


class FakeModel:
    """The fake model server (a context manager: ``with FakeModel() as model: model.url``)."""

    def __init__(self, tool: str | None = TOOL) -> None:
        #: The tool the model calls at the start of each turn (``None``: never calls a tool).
        self.tool = tool
        #: The arguments of that call (JSON object).
        self.arguments: dict[str, Any] = {"topic": "the answer"}
        #: Every request body received, in order.
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @contextmanager
    def calling(self, tool: str, **arguments: Any) -> Iterator[None]:
        """Within the block the model calls ``tool`` with ``arguments`` instead."""
        before = self.tool, self.arguments
        self.tool, self.arguments = tool, arguments
        try:
            yield
        finally:
            self.tool, self.arguments = before

    def take(self) -> list[dict[str, Any]]:
        """The requests received since the last ``take`` (and forget them)."""
        with self._lock:
            done, self.requests = self.requests, []
        return done

    # ------------------------------------------------------------------ the script
    def answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The assistant message for one request (``content`` and/or ``tool_calls``)."""
        messages = _after_tools(body.get("messages") or [])
        last = messages[-1] if messages else {}
        offered = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        if last.get("role") == "tool":
            return {"role": "assistant", "content": FINAL}
        if self.tool is not None and self.tool in offered:
            n = len(self.requests)
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": self.tool, "arguments": json.dumps(self.arguments)},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": FINAL}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with model._lock:
                    message = model.answer(body)
                    model.requests.append(body)
                    n = len(model.requests)
                if body.get("stream"):
                    self._stream(message, body, n)
                else:
                    self._send(200, _completion(message, body, n))

            def _send(self, status: int, payload: Mapping[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message: Mapping[str, Any], body: Mapping[str, Any], n: int) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in _chunks(message, body, n):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _completion(message: Mapping[str, Any], body: Mapping[str, Any], n: int) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": dict(message), "finish_reason": finish}],
        "usage": _usage(),
    }


def _chunks(message: Mapping[str, Any], body: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
    }
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            "usage": _usage(),
        },
    ]


# ---------------------------------------------------------------------- reading requests
def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def _after_tools(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without a trailing user message that follows tool results: per-call text a
    framework adds after them (Strands folds its injected text into the tool-result message,
    which its OpenAI model sends as a user message after the tool messages)."""
    if [m.get("role") for m in messages[-2:]] == ["tool", "user"]:
        return messages[:-1]
    return messages


def request_text(body: Mapping[str, Any]) -> str:
    """Every text of one chat-completions request the model reads, joined by newlines."""
    return "\n".join(t for m in body.get("messages") or [] for t in _texts(m.get("content")))


def memory_counts(body: Mapping[str, Any], texts: Iterable[str]) -> dict[str, int]:
    """How many times each of ``texts`` (memories' contents) appears in the request."""
    seen = request_text(body)
    return {t: seen.count(t) for t in texts}


def user_messages(body: Mapping[str, Any]) -> list[str]:
    """The texts of the request's user messages, in order."""
    return [
        "\n".join(_texts(m.get("content")))
        for m in body.get("messages") or []
        if m.get("role") == "user"
    ]


# ---------------------------------------------------------------------- the shared scenario
#: The project the agents under test work in, and another one whose memories they never see.
PROJECT, OTHER_PROJECT = "github.com/acme/app", "github.com/acme/api"
DEPLOY = "The deploy target of the billing service is Fly.io"
TABS = "Alice prefers tabs over spaces in Python code"
#: Alice's memory of the other project, and Bob's: both match the turns' words.
OTHER = "The billing service of acme/api deploys to Kubernetes with tabs"
BOBS = "Bob deploys the billing service to Heroku and prefers spaces"
MEMORIES = (DEPLOY, TABS, OTHER, BOBS)
#: The user turns of the scenario: turn 2 needs DEPLOY again and TABS for the first time.
TURNS = (
    "Where do we deploy the billing service?",
    "For the billing service deploy, tabs or spaces in the Python code?",
    "Thanks, that is all.",
)


def open_engine(home: Path) -> MemoryEngine:
    """A fresh engine on a SQLite file under ``home``, with the hash embedder (fast, and its
    word-overlap similarity is all the scenario needs), seeded with :data:`MEMORIES`. The
    store is the one tests/conftest.py's ``Backend("sqlite", home)`` (and so a ``memlane
    serve`` started on it by tests/server_support.py) opens."""
    engine = open_engine_as_is(home)
    seed(engine)
    return engine


def open_engine_as_is(home: Path, llm: Any = None) -> MemoryEngine:
    """The engine of :func:`open_engine` on the store as it is (not seeded), with ``llm``."""
    settings = Settings.load(home, store={"backend": "sqlite", "path": str(home / "memlane.db")})
    embedder = HashEmbedder()
    return MemoryEngine(settings, open_store(settings, embedder), embedder, llm)


def seed(engine: MemoryEngine) -> None:
    engine.add(DEPLOY, owner="alice", project=PROJECT)
    engine.add(TABS, owner="alice")
    engine.add(OTHER, owner="alice", project=OTHER_PROJECT)
    engine.add(BOBS, owner="bob")


def block_of(body: Mapping[str, Any]) -> str:
    """The memlane text of one request: from the first block's prefix to the end of its last
    line of memories (the requests of one turn must carry the same)."""
    text = request_text(body)
    start = text.find(INJECTION_BLOCK_PREFIX)
    assert start >= 0, f"no memlane block in the request: {text[:400]!r}"
    lines: list[str] = []
    for line in text[start:].splitlines():
        if line and not line.startswith("["):
            break
        lines.append(line)
    return "\n".join(lines).strip()


def check_turn(requests: list[dict[str, Any]], shown: Iterable[str], *, calls: int = 2) -> None:
    """The model requests of one user turn of the scenario: ``calls`` of them (a tool call, then
    the answer); every one holds each memory of ``shown`` exactly once and the same memlane text;
    none holds Bob's memory, the other project's, or any memory twice."""
    assert len(requests) == calls, [request_text(r)[-300:] for r in requests]
    shown = list(shown)
    for body in requests:
        counts = memory_counts(body, MEMORIES)
        assert all(counts[m] == 1 for m in shown), counts
        assert counts[BOBS] == 0 and counts[OTHER] == 0, counts
        assert max(counts.values()) <= 1, counts
    assert len({block_of(r) for r in requests}) == 1, [block_of(r) for r in requests]


def run_scenario(model: FakeModel, ask: Callable[[str], object]) -> list[list[dict[str, Any]]]:
    """The scenario's three turns through ``ask`` (one user message -> the framework's agent
    answers it); checks each turn's model requests (:func:`check_turn`) for a door whose text
    is not kept: turn 1 shows DEPLOY; turn 2 DEPLOY again (the framework did not keep it, so the
    turn model gives it back) and TABS; turn 3 (trivial) still both. Returns the requests of
    each turn."""
    model.take()
    seen: list[list[dict[str, Any]]] = []
    for text, shown in zip(TURNS, ([DEPLOY], [DEPLOY, TABS], [DEPLOY, TABS]), strict=True):
        ask(text)
        requests = model.take()
        check_turn(requests, shown)
        assert text in user_messages(requests[0])[-1]
        seen.append(requests)
    assert TABS not in request_text(seen[0][0])
    return seen


def check_bob(model: FakeModel, ask: Callable[[str], object]) -> None:
    """A run of Bob's on the same adapter sees Bob's memory and none of Alice's."""
    model.take()
    ask(TURNS[0])
    requests = model.take()
    assert requests
    for body in requests:
        counts = memory_counts(body, MEMORIES)
        assert counts == {DEPLOY: 0, TABS: 0, OTHER: 0, BOBS: 1}, counts


def tool_replies(requests: Iterable[Mapping[str, Any]]) -> list[str]:
    """The tool results the requests end with, in order."""
    replies = []
    for body in requests:
        last = (_after_tools(body.get("messages") or []) or [{}])[-1]
        if last.get("role") == "tool":
            replies.extend(_unwrapped(t) for t in _texts(last.get("content")))
    return replies


def _unwrapped(text: str) -> str:
    """A tool result as the tool returned it: Google ADK sends a function's text as the JSON
    ``{"result": text}``."""
    with contextlib.suppress(ValueError):
        value = json.loads(text)
        if (
            isinstance(value, dict)
            and list(value) == ["result"]
            and isinstance(value["result"], str)
        ):
            return value["result"]
    return text


#: What a ``remember`` tool answers for a new memory, and for one the store already holds.
SAVED, KNOWN = "Remembered (added", "Already remembered (hash_exact)"
FEDORA = "Alice's laptop runs Fedora"


def check_remember(
    model: FakeModel, engine: MemoryEngine, ask: Callable[[str], object], source: str
) -> None:
    """The framework's ``remember`` tool through the write path: a new memory is added to the
    adapter's project under Alice; TABS (a global memory of hers) is that memory."""
    model.take()
    with model.calling("remember", content=FEDORA):
        ask("Remember that my laptop runs Fedora")
    with model.calling("remember", content=TABS):
        ask("Remember: tabs over spaces")
    replies = tool_replies(model.take())
    assert len(replies) == 2 and replies[0].startswith(SAVED) and replies[1].startswith(KNOWN), (
        replies
    )
    saved = [m for m in engine.list(owner="alice") if m.content == FEDORA]
    assert [(m.project, m.source) for m in saved] == [(PROJECT, source)]
    assert all(m.content != FEDORA for m in engine.list(owner="bob"))


# ---------------------------------------------------------------------- memlane serve
@contextmanager
def memlane_serve(home: Path) -> Iterator[str]:
    """The real ``memlane serve`` on the store of ``home`` (hash embedder), run by the main
    environment's Python (.venv: the server extra, which a framework's own environment under
    .fwenvs/ lacks), on a free loopback port; yields its URL once ``/health`` answers."""
    import httpx  # here: not every framework's environment has it

    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        raise AssertionError(f"{python} is missing: `make install` builds the main environment")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "PYTHON"))}
    env |= {"MEMLANE_HOME": str(home), "MEMLANE_EMBEDDING__PROVIDER": "hash"}
    env |= {"MEMLANE_STORE__BACKEND": "sqlite", "MEMLANE_STORE__PATH": str(home / "memlane.db")}
    env["PYTHONPATH"] = str(ROOT / "src")
    with (home / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [str(python), "-m", "memlane", "serve", "--port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                time.sleep(0.1)
            assert proc.poll() is None, (home / "serve.log").read_text()
            yield url
        finally:
            proc.kill()
            proc.wait(timeout=30)


# ---------------------------------------------------------------------- secrets (issue #33)
@contextmanager
def memlane_at(home: Path, over: str) -> Iterator[Any]:
    """What an adapter is given, on a store under ``home`` seeded by :func:`open_engine`: the
    engine itself (``over="engine"``, closed at the end) or the client of a real ``memlane
    serve`` on it (``over="serve"``, :func:`memlane_serve`; the server is stopped at the end)."""
    if over == "engine":
        engine = open_engine(home)
        try:
            yield engine
        finally:
            engine.close()
        return
    assert over == "serve", over
    open_engine(home).close()
    with memlane_serve(home) as url, contextlib.closing(connect(url)) as client:
        yield client


def tell_secrets(model: FakeModel, ask: Callable[[str], object], door: str) -> None:
    """Two user turns through ``ask`` (one user message -> the framework's agent answers it),
    each message holding ``door``'s secrets and a ``<private>`` span
    (tests/privacy_support.py's ``text_of``): in the first the model calls the adapter's
    ``remember`` tool with that text (a model repeats what it was told), which is added; in the
    second it calls the lookup tool (the message goes through the turn model only)."""
    model.take()
    with model.calling("remember", content=text_of(door)):
        ask(text_of(door, "Remember this: "))
    ask(text_of(door, "What do we know of it? "))
    replies = tool_replies(model.take())
    assert len(replies) == 2 and replies[0].startswith(SAVED), replies


def check_secrets_off_disk(home: Path, door: str) -> None:
    """After :func:`tell_secrets` on the store under ``home``: no file under ``home`` nor under
    ``$MEMLANE_HOME`` (the store, its WAL and SHM, the search index files, the logs) holds any
    of ``door``'s secrets or its private text, read byte by byte before and after an engine
    opens the store to read Alice's memories (its close checkpoints the WAL into the store
    file); the memory is stored without them, the rest of the text kept, and its bytes are in
    the files scanned (so the scan reads where memories are)."""
    homes = [home, Path(os.environ["MEMLANE_HOME"])]
    for h in homes:
        assert leaks(h, [door]) == {}, (h, leaks(h, [door]))
    engine = open_engine_as_is(home)
    try:
        saved = [m.content for m in engine.list(owner="alice", limit=100) if door in m.content]
    finally:
        engine.close()
    kept = text_of(door).split(" AWS_SECRET")[0]  # "the DOOR deploy uses"
    assert len(saved) == 1, saved
    assert saved[0].startswith(kept) and saved[0].endswith(" for the staging kiwi cluster")
    for kind in ("aws_secret_access_key", "github_token", "url_password"):
        assert f"[redacted:{kind}]" in saved[0], saved[0]
    assert files_holding(home, kept.encode()), "the stored memory is in no file under the home"
    for h in homes:
        assert leaks(h, [door]) == {}, (h, leaks(h, [door]))


def check_secrets_through(
    model: FakeModel, home: Path, over: str, door: str, chat_of: Callable[[Any], Any]
) -> None:
    """:func:`tell_secrets` through a framework's agent (``chat_of(memory)``: an object with
    ``ask(text)`` and ``close()``, over the memory :func:`memlane_at` gives for ``over``), then
    :func:`check_secrets_off_disk` with the store open (its WAL is read too) and closed."""
    with memlane_at(home, over) as memory:
        chat = chat_of(memory)
        try:
            tell_secrets(model, chat.ask, door)
            check_secrets_off_disk(home, door)
        finally:
            chat.close()
    check_secrets_off_disk(home, door)


# ---------------------------------------------------------------------- docs/frameworks.md
def run_docs_example(title: str, model: FakeModel, tmp_path: Path) -> None:
    """docs/frameworks.md's example under ``### title``, run with this interpreter as
    tests/test_fw_docs.py runs the others (for a framework with its own environment)."""
    import test_fw_docs as docs

    (code,) = [code for found, code in docs.examples() if found == title]
    docs.run_example(code, model, tmp_path)


def check_page_rows(name: str, model: FakeModel) -> None:
    """docs/frameworks.md's ``| name |`` rows are what scripts/framework_turns.py prints for
    ``name`` now: three turns, two model calls each."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import framework_turns
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    rows = framework_turns.rows(name, model)
    assert len(rows) == 6, rows
    page = (ROOT / "docs" / "frameworks.md").read_text().splitlines()
    assert rows == [line for line in page if line.startswith(f"| {name} |")]
