"""The MCP server: memlane's memory as tools for any MCP client (Claude Code, Claude Desktop,
Gemini CLI, Cursor ...), over stdio or streamable HTTP on loopback.

Built on the official SDK's ``FastMCP`` (``mcp`` 1.x, pinned in the ``mcp`` extra). Tools:
``remember``, ``recall``, ``context_for_turn``, ``forget``, ``list_memories``,
``reset_session``; their arguments are checked against the schema the SDK derives from the
signatures below (a bad argument is a tool error, ``isError: true``, naming the argument), and
every failure inside a tool is returned as a tool error with a one-line message: the server never
dies on input.

Start-up: the handshake (``initialize``, ``tools/list``) is answered at once; the store opens and
the embedding model loads in a background thread (another project's server timed out in its
client because it loaded its model before answering). ``forget`` and ``list_memories`` need only
the store; the other tools wait for the model (up to :data:`MODEL_WAIT_S`).

Scope: ``--owner``, else the hooks' (``[hooks] owner``, else ``[scope] owner``, else
``"default"``: :func:`memlane.scope.resolve_owner`);
memories written here have no agent (shared by every agent of the owner) unless ``--agent``.
Project: ``--project``, else the repository holding the server's working folder (the client
starts it in the project: :func:`memlane.scope.project_identity`), else none. ``remember``
stores in that project by default (``scope="project"``) or for every project
(``scope="global"``); ``recall``, ``context_for_turn`` and ``list_memories`` see the project's
memories and the owner's global ones (outside a repository: every memory of the owner).
``context_for_turn`` keeps the same per-session tracking as the hooks (same store, same owner).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import Field, ValidationError

from memlane.errors import MemlaneError
from memlane.types import Memory

log = logging.getLogger("memlane.mcp")

#: Longest wait of a tool for the store and the model, in seconds (the local model loads in
#: 2-15 s on a small machine; a cold disk can take longer).
MODEL_WAIT_S = 120.0
#: Instructions the client may show the model.
INSTRUCTIONS = (
    "memlane is long-term memory. Call context_for_turn with the user's message at the start "
    "of each turn to get the memories that matter for it (never the same ones twice within a "
    "session); remember durable facts, preferences and decisions the user states; recall to "
    "search; forget what the user asks you to forget."
)

T = TypeVar("T")

MemoryTypeName = Literal[
    "identity", "goal", "decision", "todo", "preference", "fact", "event", "observation"
]


class EngineHolder:
    """The engine, opened in a background thread: :meth:`get` waits for the store (and the
    model when asked) and raises :class:`ToolError` if opening failed."""

    def __init__(self, home: str | None) -> None:
        self.home = home
        self.engine: Any = None
        self.error: BaseException | None = None
        self.store_ready = threading.Event()
        self.model_ready = threading.Event()
        self.started = time.monotonic()

    def start(self) -> None:
        threading.Thread(target=self._load, name="memlane-mcp-load", daemon=True).start()

    def _load(self) -> None:
        try:
            from memlane.engine import MemoryEngine

            self.engine = MemoryEngine.open(self.home)
            self.store_ready.set()
            self.engine.embed(["warm up"])  # the model loads on its first text
            log.info("model ready after %.1f s", time.monotonic() - self.started)
        except BaseException as exc:
            self.error = exc
            log.error("memlane could not start: %s: %s", type(exc).__name__, exc)
        finally:
            self.store_ready.set()
            self.model_ready.set()

    def get(self, need_model: bool) -> Any:
        event = self.model_ready if need_model else self.store_ready
        if not event.wait(MODEL_WAIT_S):
            raise ToolError(
                f"memlane is still loading its embedding model after {MODEL_WAIT_S:.0f} s; "
                "try again in a moment"
            )
        if self.error is not None:
            raise ToolError(
                f"memlane could not open its store or model: {type(self.error).__name__}: "
                f"{self.error}"
            )
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


#: The fields of a memory the MCP tools answer with (a model reads them: fewer tokens than the
#: whole memory); ``project`` ``None``: global.
MEMORY_FIELDS = ("id", "content", "type", "importance", "created_at", "project")


def _memory(m: Memory, **extra: Any) -> dict[str, Any]:
    """:data:`MEMORY_FIELDS` of ``m.to_dict()`` (the one serialisation of a memory), with
    ``extra``."""
    whole = m.to_dict()
    return {name: whole[name] for name in MEMORY_FIELDS} | extra


def one_line(tool: str, exc: ValidationError) -> str:
    """``exc`` (the SDK's check of ``tool``'s arguments) as one line naming each field:
    ``remember: content: String should have at least 1 character`` (pydantic's own text
    spans lines and ends with a URL). The values are not quoted: they may be secrets."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{field}: {error['msg']}")
    return f"{tool}: {'; '.join(problems)} (see the tool's input schema)"


class _Server(FastMCP):  # type: ignore[type-arg]
    """The SDK's server with memlane's version in ``serverInfo`` (not the ``mcp`` package's)
    and a bad argument answered in one line naming the field (:func:`one_line`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from memlane import __version__

        super().__init__(*args, **kwargs)
        self._mcp_server.version = __version__

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(one_line(name, exc.__cause__)) from None
            raise


def build_server(
    *,
    home: str | None = None,
    owner: str | None = None,
    agent: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8766,
    project: str | None = None,
    cwd: str | None = None,
) -> tuple[FastMCP, EngineHolder]:
    """The MCP server and its engine holder (call ``holder.start()`` before serving).
    ``project``: the project's identity; ``None``: the repository holding ``cwd`` (default:
    the working folder), if any (module docstring).

    Raises:
        memlane.hooks.config.HookConfigError: invalid ``[hooks]`` settings (for the owner).
    """
    from memlane.hooks.config import load_config
    from memlane.scope import project_identity

    cfg = load_config(home)
    scope_owner = owner or cfg.scope("mcp", None)[0]  # the scope rule (memlane.scope)
    here = project or project_identity(cwd or os.getcwd())
    max_chars = cfg.max_chars
    holder = EngineHolder(home)
    server = _Server(
        "memlane", instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING"
    )

    async def call(fn: Callable[[Any], T], *, need_model: bool) -> T:
        def run() -> T:
            engine = holder.get(need_model)
            try:
                return fn(engine)
            except MemlaneError as exc:
                raise ToolError(" ".join(str(exc).split()) or type(exc).__name__) from None
            except ToolError:
                raise
            except Exception as exc:
                log.exception("tool failed")
                raise ToolError(f"internal error: {type(exc).__name__}: {exc}") from None

        return await anyio.to_thread.run_sync(run)

    @server.tool()
    async def remember(
        content: Annotated[str, Field(min_length=1, description="The memory, one fact per call.")],
        type: Annotated[MemoryTypeName, Field(description="What kind of memory it is.")] = "fact",
        importance: Annotated[
            float | None,
            Field(ge=0, le=1, description="0..1; omit for the type's default."),
        ] = None,
        scope: Annotated[
            Literal["project", "global"],
            Field(
                description="project: for this repository only (the default inside one); "
                "global: for every project (the user's preferences, facts about them)."
            ),
        ] = "project",
    ) -> dict[str, Any]:
        """Store a durable memory about the user or the work (a preference, a decision, a fact
        about the project). memlane refuses duplicates: the answer's decision says whether it
        was added, merged into an existing memory (replaced) or already known (hash_exact,
        auto_reject). Never store the contents of a [Context from memory] block. A fact about
        this codebase: scope "project"; about the user, true everywhere: scope "global"."""

        def do(engine: Any) -> dict[str, Any]:
            r = engine.add(
                content, type=type, importance=importance, owner=scope_owner, agent=agent,
                source="mcp", project=here if scope == "project" else None,
            )  # fmt: skip
            return dict(r.to_dict())  # the one serialisation of a write's outcome

        return await call(do, need_model=True)

    @server.tool()
    async def recall(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        limit: Annotated[int, Field(ge=1, le=50, description="Most memories returned.")] = 5,
    ) -> dict[str, Any]:
        """Search the user's memories (hybrid: meaning and keywords), best first, each with its
        fused score and cosine similarity to the query."""

        def do(engine: Any) -> dict[str, Any]:
            hits = engine.search(query, owner=scope_owner, agent=agent, limit=limit, project=here)
            return {
                "memories": [
                    _memory(h.memory, score=round(h.score, 6), similarity=round(h.similarity, 6))
                    for h in hits
                ]
            }

        return await call(do, need_model=True)

    @server.tool()
    async def context_for_turn(
        session: Annotated[
            str, Field(min_length=1, description="A stable id of this conversation.")
        ],
        text: Annotated[str, Field(min_length=1, description="The user's message of this turn.")],
    ) -> dict[str, Any]:
        """The memories relevant to this turn as one block to read before answering (block is
        null when there is nothing new). A memory already given in this session within the
        last turns is not given again; call reset_session after the conversation is compacted
        or cleared."""

        def do(engine: Any) -> dict[str, Any]:
            result = engine.inject(
                session, text, owner=scope_owner, agent=agent, max_chars=max_chars, project=here
            )
            return {
                "block": result.block,
                "ids": [i.memory.id for i in result.items],
                "turn": result.turn,
            }

        return await call(do, need_model=True)

    @server.tool()
    async def forget(
        id: Annotated[str, Field(min_length=1, description="The memory's id (from recall).")],
    ) -> dict[str, Any]:
        """Forget one memory (it is kept on disk with its history but never searched or
        injected again). Use when the user asks to forget something or a memory is wrong."""

        def do(engine: Any) -> dict[str, Any]:
            m = engine.forget(id, owner=scope_owner, agent=agent)
            return {"forgotten": m.id, "content": m.content}

        return await call(do, need_model=False)

    @server.tool()
    async def list_memories(
        type: Annotated[MemoryTypeName | None, Field(description="Only this type.")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most memories returned.")] = 20,
    ) -> dict[str, Any]:
        """The user's memories, newest first (model_ready says whether searching is available
        yet)."""

        def do(engine: Any) -> dict[str, Any]:
            rows = engine.list(owner=scope_owner, agent=agent, type=type, limit=limit, project=here)
            return {
                "memories": [_memory(m) for m in rows],
                "model_ready": holder.model_ready.is_set(),
            }

        return await call(do, need_model=False)

    @server.tool()
    async def reset_session(
        session: Annotated[str, Field(min_length=1, description="The conversation's id.")],
        reason: Annotated[
            Literal["compact", "clear", "resume"],
            Field(description="compact or clear: the earlier context is gone."),
        ] = "clear",
    ) -> dict[str, Any]:
        """Start the session's tracking over: after the conversation was compacted or cleared,
        memories given before may be given again."""

        def do(engine: Any) -> dict[str, Any]:
            state = engine.reset_session(session, reason, owner=scope_owner)
            return {"session": state.session, "reason": reason, "turn": state.turn}

        return await call(do, need_model=False)

    return server, holder


def serve(
    *,
    home: Path | None,
    owner: str | None,
    agent: str | None,
    http: bool,
    host: str,
    port: int,
    project: str | None = None,
) -> None:
    """Run the server until the client closes stdio (or ^C with ``http``)."""
    server, holder = build_server(
        home=str(home) if home else None, owner=owner, agent=agent, host=host, port=port,
        project=project,
    )  # fmt: skip
    holder.start()
    try:
        if http:
            server.run("streamable-http")
        else:
            run_stdio(server)
    finally:
        holder.close()


def run_stdio(server: FastMCP) -> None:  # type: ignore[type-arg]
    """``server.run("stdio")`` over copies of the process's stdin and stdout descriptors: the
    SDK wraps ``sys.stdout.buffer`` in a text wrapper that closes it when collected, and the
    CLI's last flush of the closed stdout then failed with a 36-line traceback (exit 1) when
    the client closed the pipe. The copies are closed instead; stdin and stdout stay open."""
    import contextlib
    import sys

    saved = sys.stdin, sys.stdout
    sys.stdin = open(os.dup(saved[0].fileno()), encoding="utf-8", errors="replace")  # noqa: SIM115
    sys.stdout = open(os.dup(saved[1].fileno()), "w", encoding="utf-8")  # noqa: SIM115
    try:
        server.run("stdio")
    finally:
        for stream in (sys.stdin, sys.stdout):
            with contextlib.suppress(OSError, ValueError):  # closed by the SDK already
                stream.close()
        sys.stdin, sys.stdout = saved
