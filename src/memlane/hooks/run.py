"""``memlane hook <event> [--client claude-code|gemini] [--home DIR]``: one hook call.

Reads the client's JSON on stdin and acts on the event:

=====================================  =====================================================
event (client)                         what the hook does
=====================================  =====================================================
``UserPromptSubmit`` (Claude Code),    one turn of the turn model (``backend.turn``,
``BeforeAgent`` (Gemini CLI)           ``kept=True``: the block stays in the client's history)
                                       for (``session_id``, ``prompt``, the client's turn id
                                       when it sends one), the query enriched with the last
                                       messages of ``transcript_path``; prints
                                       ``{"hookSpecificOutput": {"hookEventName": ...,
                                       "additionalContext": block}}``, or nothing when there is
                                       nothing to inject or the call repeats the turn
``SessionStart`` source ``clear`` /    reset the session's tracking (reason ``clear`` /
``compact``                            ``compact``): the model no longer has what was
                                       injected; then as ``startup``
``SessionStart`` ``resume``            nothing: the replayed transcript still holds the blocks
``SessionStart`` ``startup``/``fork``  a new session: with ambient awareness on, print the
                                       pinned memories (recorded as injected); else nothing
``PreCompact`` (Claude Code)           reset (reason ``compact``)
``BeforeModel`` (Gemini CLI)           compare the tracking with the memlane blocks the
                                       request to the model really holds (``llm_request``):
                                       memories of the window compressed away are added to
                                       this request (prints the changed ``llm_request``);
                                       those still held are not injected again while they
                                       stay
``PreCompress`` (Gemini CLI)           nothing: 0.61 fires it every turn, before deciding
                                       whether to compress
``Stop`` with ``[hooks] learn``        start ``memlane learn`` on the transcript in the
                                       background (new messages only) and return at once
``SessionEnd``, ``Stop``, others       nothing (``SessionEnd`` must finish in ~1.5 s)
=====================================  =====================================================

Never in the user's way: whatever fails (bad JSON, no server and no fallback, a store error, the
deadline ``[hooks] timeout_s``), the hook prints nothing, exits 0 and appends one line to
``<home>/logs/hooks.log``. It never exits 2 (that would block the prompt and erase it).

Only the standard library and :mod:`memlane.hooks` are imported on the way to the server; the
engine is imported only when no server answers (``[hooks] fallback``).
"""

from __future__ import annotations

import _thread  # not threading: it imports functools and collections (ms of every call)
import os
import sys
import time

from memlane import _fastjson as json
from memlane.hooks.clients import CLAUDE_CODE_MAX_CHARS as CLAUDE_CODE_MAX_CHARS
from memlane.hooks.clients import CLIENTS, adapt, turn_id
from memlane.hooks.config import DEFAULT_HOME, HookConfig, load_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any, BinaryIO, TextIO

#: Events that inject before a model turn.
PROMPT_EVENTS = frozenset({"UserPromptSubmit", "BeforeAgent"})
#: Events that reset the session's tracking for compaction. Not Gemini CLI's ``PreCompress``:
#: 0.61 fires it on every turn, before it decides whether to compress (its
#: ``ChatCompressionService.compress``): a reset there would reset every turn.
COMPACT_EVENTS = frozenset({"PreCompact", "PostCompact"})
#: Gemini CLI's event before each request to its model, with the request's messages: the
#: one place that sees whether a compression (automatic, or ``/compress``) or ``/clear``
#: really took memlane's blocks out of the history (docs/integrations.md).
SYNC_EVENT = "BeforeModel"

#: ``SessionStart`` sources that reset the tracking (with that reason).
RESET_SOURCES = frozenset({"clear", "compact"})
#: Every event the hook knows (others are logged and ignored).
EVENTS = frozenset(
    {*PROMPT_EVENTS, *COMPACT_EVENTS, "SessionStart", "SessionEnd", "Stop",
     "AfterAgent", "PreCompress", SYNC_EVENT, "PostCompact"}
)  # fmt: skip
#: Events only Gemini CLI sends (the client when ``--client`` is not given).
GEMINI_EVENTS = frozenset({"BeforeAgent", "PreCompress", "AfterAgent", SYNC_EVENT})
#: Size at which hooks.log is moved to hooks.log.1 (one old file kept).
LOG_MAX_BYTES = 1_000_000

USAGE = f"usage: memlane hook EVENT [--client {'|'.join(CLIENTS)}] [--home DIR] < payload.json"


def utc_stamp(now: float) -> str:
    """``now`` (seconds since the epoch) as ``2026-11-23T17:31:02.120123Z`` (what
    ``datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")`` writes, without importing
    :mod:`datetime` on every hook call)."""
    micro = int(now * 1_000_000) % 1_000_000
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(now))}.{micro:06d}Z"


class HookLog:
    """Appends one line per event worth keeping to ``<home>/logs/hooks.log`` (never raises)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, level: str, message: str) -> None:
        line = f"{utc_stamp(time.time())} pid={os.getpid()} {level} {' '.join(message.split())}\n"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            if os.path.exists(self.path) and os.path.getsize(self.path) > LOG_MAX_BYTES:
                os.replace(self.path, self.path + ".1")
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError:
            pass  # a log that cannot be written must not fail the hook either


def _parse_args(argv: list[str]) -> tuple[str, str | None, str | None]:
    """``(event, client, home)`` from ``argv``. Raises ``ValueError`` with the usage line."""
    event: str | None = None
    client = home = None
    args = iter(argv)
    for arg in args:
        if arg in {"--client", "--home"} or arg.startswith(("--client=", "--home=")):
            name, _, value = arg.partition("=")
            value = value or next(args, "")
            if not value:
                raise ValueError(f"{name} needs a value; {USAGE}")
            if name == "--client":
                client = value
            else:
                home = value
        elif arg.startswith("-"):
            raise ValueError(f"unknown option {arg}; {USAGE}")
        elif event is None:
            event = arg
        else:
            raise ValueError(f"unexpected argument {arg!r}; {USAGE}")
    if event is None:
        raise ValueError(USAGE)
    if client is not None and client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}; valid: {', '.join(CLIENTS)}")
    return event, client, home


def output(event: str, block: str, client: str = "claude-code") -> str:
    """The exact JSON line ``client`` accepts for injected context
    (:func:`memlane.hooks.clients.output`; INTEGRATIONS.md: unknown keys or a bare object
    fail Claude Code's validation)."""
    from memlane.hooks.clients import output as client_output

    return client_output(client, event, block)


class _Run:
    """One hook call: the payload, the config, the log, and the output written at most once
    (and never after the deadline)."""

    def __init__(self, event: str, client: str, cfg: HookConfig, log: HookLog) -> None:
        self.event = event
        self.client = client
        self.cfg = cfg
        self.log = log
        self.lock = _thread.allocate_lock()
        self.expired = False
        self.printed: str | None = None
        self.deadline = time.monotonic() + cfg.timeout_s

    def _backend(self) -> Any:
        """The server that serves this home's store (``[hooks] url`` when set, else the one
        recorded in the home, once it proved it serves this store: :mod:`memlane.hooks.connect`),
        else the engine in-process (the reason logged; with ``[hooks] autostart`` the daemon is
        started for the next calls)."""
        from memlane.hooks.connect import choose

        return choose(self.cfg, self.event, self.deadline, self.log.write)

    def max_chars(self) -> int:
        """``[hooks] max_chars``, at most what the client passes whole (Claude Code
        :data:`CLAUDE_CODE_MAX_CHARS`: a longer ``additionalContext`` is replaced by a short
        preview, INTEGRATIONS.md; Codex: :func:`memlane.hooks.clients.max_chars`)."""
        from memlane.hooks.clients import max_chars

        return max_chars(self.client, self.cfg.max_chars)

    def act(self, payload: dict[str, Any]) -> None:
        """Do what ``self.event`` asks (module docstring). Raises on any failure."""
        event = self.event
        session = payload.get("session_id")
        learn = event == "Stop" and self.cfg.learn
        quiet = {"SessionEnd", "Stop", "AfterAgent", "PreCompress"}
        if event not in EVENTS or (event in quiet and not learn):
            return
        if not isinstance(session, str) or not session.strip():
            raise ValueError(f"the payload has no session_id (got {session!r})")
        owner, agent = self.cfg.owner_agent(self.client)
        cwd = _str(payload.get("cwd"))
        if learn:
            project = self.cfg.project(cwd)
            self.learn(session, owner, agent, _str(payload.get("transcript_path")), project)
            return
        if event == SYNC_EVENT:
            self.sync(session, owner, agent, payload.get("llm_request"))
            return
        if event in PROMPT_EVENTS:
            # Qwen Code: the user's own text (``prompt`` may be model-bound text on a
            # continuation; empty after a tool's result)
            prompt = payload.get("submitted_prompt") or payload.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                return  # nothing typed: nothing to search for, no turn counted
            from memlane.hooks.transcript import recent_messages, remembered_ids

            if self.client == "codex":  # Codex's rollout file has its own shape
                from memlane.hooks.codex_transcript import recent_messages, remembered_ids

            transcript = _str(payload.get("transcript_path"))
            recent = recent_messages(transcript, self.cfg.recent_messages, prompt=prompt)
            # memories this session wrote through memlane's MCP remember: the model holds them
            # (Gemini CLI's transcript has its own shape: memlane.hooks.gemini)
            if self.client == "gemini":
                from memlane.hooks.gemini import remembered_ids as remembered
            elif self.client == "qwen":
                from memlane.hooks.qwen import remembered_ids as remembered
            elif self.client == "copilot":
                from memlane.hooks.copilot import remembered_ids as remembered
            else:
                remembered = remembered_ids
            known = remembered(transcript)
            if self.client == "opencode":  # its plugin sends the calls' outputs (no transcript)
                from memlane.hooks.opencode import REMEMBERED_KEY
                from memlane.hooks.opencode import remembered_ids as sent

                known = sent(payload.get(REMEMBERED_KEY))
            project = self.cfg.project(cwd)
            backend = self._backend()
            turn_key = turn_id(self.client, payload)
            try:  # every client: one turn, its block kept in the client's history
                found = backend.turn(
                    session, prompt, kept=True, key=turn_key, owner=owner, agent=agent,
                    recent=recent, max_chars=self.max_chars(), known=list(known),
                    project=project,
                )  # fmt: skip
            finally:
                backend.close()
            block = None if found.get("repeat") else found.get("block")
            ids = tuple(str(i["memory"]["id"]) for i in found.get("items") or [])
            if block:  # a repeat of the turn prints nothing: its block is in the history
                self.emit(output(event, block, self.client), ids)
            return
        reason = None
        source = payload.get("source")
        if event in COMPACT_EVENTS:
            reason = "compact"
        elif event == "SessionStart" and source in RESET_SOURCES:
            reason = str(source)
        pinned = event == "SessionStart" and source != "resume" and self.cfg.ambient(agent)
        if reason is None and not pinned:
            return  # nothing to reset or print: no server asked, no engine, no git run
        project = self.cfg.project(cwd) if pinned else None
        backend = self._backend()
        try:
            if reason is not None:
                backend.reset(session, reason, owner=owner)
                self.log.write("INFO", f"{event} session={session} owner={owner} reset ({reason})")
            if pinned:  # the model starts without context: the pinned memories (ambient on)
                result = backend.inject_pinned(
                    session,
                    owner=owner,
                    agent=agent,
                    max_chars=self.max_chars(),
                    project=project,
                )
                if result.block:
                    self.emit(output(event, result.block, self.client), result.ids)
        finally:
            backend.close()

    def sync(self, session: str, owner: str, agent: str, request: Any) -> None:
        """Gemini CLI's ``BeforeModel``: compare the session's tracking with the memlane blocks
        of the request (:mod:`memlane.hooks.gemini`; :meth:`memlane.injection.Sessions.sync`).
        Memories shown within the window that the request lacks (a compression inside the
        turn took them, after ``BeforeAgent`` ran) are added to this request; otherwise it
        prints nothing and the request goes out as it is."""
        from memlane.hooks.gemini import memlane_blocks, with_block

        blocks = memlane_blocks(request)
        backend = self._backend()
        try:
            found = backend.sync(session, blocks, owner=owner, agent=agent)
        finally:
            backend.close()
        if not found.block:
            return
        changed = with_block(request, found.block)
        if changed is None:
            self.log.write(
                "WARNING",
                f"{self.event} session={session}: {len(found.ids)} memories are no longer in "
                "the request, which has no user message to add them to: not added",
            )
            return
        self.log.write(
            "INFO",
            f"{self.event} session={session} owner={owner}: {len(found.ids)} memories no longer "
            f"in the request (compressed away) added to it: {', '.join(found.ids)}",
        )
        line = json.dumps(
            {"hookSpecificOutput": {"hookEventName": self.event, "llm_request": changed}},
            ensure_ascii=False,
        )
        self.emit(line, found.ids)

    def learn(
        self, session: str, owner: str, agent: str, transcript: str | None, project: str | None
    ) -> None:
        """Start ``memlane learn`` on the transcript in the background (its own session, its
        errors appended to hooks.log) and return at once: the LLM call never delays the user.
        The memories learned belong to the session's ``project`` (global outside one).
        The engine reads only the messages after those learned before (per session) and never
        shows injected ``[Context from memory]`` blocks to the model."""
        import subprocess

        if transcript is None or not os.path.isfile(transcript):
            raise ValueError(f"[hooks] learn: no transcript at {transcript!r}")
        args = [sys.executable, "-m", "memlane", "learn", transcript, "--owner", owner]
        args += ["--agent", agent, "--session", session, "--home", self.cfg.home]
        args += ["--project", project] if project else []
        os.makedirs(os.path.dirname(self.cfg.log_path), exist_ok=True)
        with open(self.cfg.log_path, "a", encoding="utf-8") as out:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # the memories' table; errors come on stderr
                stderr=out,
                start_new_session=True,  # not killed with the hook, nor by the client's ^C
            )
        self.log.write("INFO", f"Stop session={session} owner={owner}: learning (pid {proc.pid})")

    def emit(self, line: str, ids: tuple[str, ...]) -> None:
        with self.lock:
            if self.expired:
                self.log.write(
                    "WARNING",
                    f"{self.event}: the injection ({len(ids)} memories) came after the deadline "
                    f"of {self.cfg.timeout_s:g} s and was not printed: {', '.join(ids)}",
                )
                return
            self.printed = line


def read_payload(stdin: BinaryIO) -> dict[str, Any]:
    """The client's JSON object from ``stdin``, parsed as soon as a whole object has arrived
    (a client that keeps its end of the pipe open does not hold the hook until EOF). Raises
    ``ValueError`` naming what is wrong."""
    read = getattr(stdin, "read1", stdin.read)
    raw = b""
    while chunk := read(65536):
        raw += chunk
        if raw.rstrip().endswith(b"}"):
            try:
                json.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue  # a "}" inside the object: more to come
            break
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"stdin is not a JSON object ({exc}); first bytes: {raw[:80]!r}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"stdin is JSON but not an object: {type(payload).__name__}")
    return payload


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def main(
    argv: list[str] | None = None,
    stdin: BinaryIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Run one hook call (module docstring); returns the exit code, always 0."""
    argv = sys.argv[1:] if argv is None else argv
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    home_dir = os.path.expanduser(os.environ.get("MEMLANE_HOME") or DEFAULT_HOME)
    log = HookLog(os.path.join(home_dir, "logs", "hooks.log"))
    event = "?"
    try:
        event, client, home = _parse_args(argv)
        if home is not None:
            log = HookLog(os.path.join(os.path.expanduser(home), "logs", "hooks.log"))
        cfg = load_config(home)
        log = HookLog(cfg.log_path)
        client = client or ("gemini" if event in GEMINI_EVENTS else "claude-code")
    except Exception as exc:
        log.write("ERROR", f"{event}: {type(exc).__name__}: {exc}")
        return 0
    run = _Run(event, client, cfg, log)
    failure: list[BaseException] = []
    payload: dict[str, Any] = {}

    finished = _thread.allocate_lock()  # held while the worker runs
    finished.acquire()

    def work() -> None:  # reading stdin too: the deadline covers a client slow to send it
        try:
            run.event, adapted = adapt(run.client, run.event, read_payload(stdin))
            payload.update(adapted)
            run.act(payload)
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)
        finally:
            finished.release()

    # a daemon thread of its own (never waited for at exit: the hook ends with os._exit)
    _thread.start_new_thread(work, ())
    done = finished.acquire(timeout=max(0.0, run.deadline - time.monotonic()))
    with run.lock:
        sid = payload.get("session_id")
        where = f"{event} session={sid}" if sid else event
        if not done:
            run.expired = True
            log.write(
                "ERROR",
                f"{where}: deadline of {cfg.timeout_s:g} s ([hooks] timeout_s) passed; "
                "nothing printed",
            )
        if failure:
            problem = failure[0]
            log.write("ERROR", f"{where}: {type(problem).__name__}: {problem}")
        if run.printed is not None and not run.expired:  # recorded = printed: print it
            try:
                stdout.write(run.printed + "\n")
                stdout.flush()
            except OSError as exc:
                log.write("ERROR", f"{event}: cannot write the output: {exc}")
    if run.expired:  # the worker may sit in a store call: leave without waiting for it
        os._exit(0)
    return 0
