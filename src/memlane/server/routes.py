"""``/v1`` routes over the engine: memories, search, inject, sessions, dedup log, stats.

Plain ``def`` routes: FastAPI runs each in its thread pool (the engine is synchronous).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query
from fastapi.responses import JSONResponse, PlainTextResponse

from memlane.engine import MemoryInput
from memlane.errors import InvalidArgument
from memlane.scope import MAX_PROJECT_CHARS
from memlane.server.auth import caller, scope
from memlane.server.models import (
    OWNER_SCHEMA,
    AddOne,
    AddRequest,
    AddResponse,
    DedupLogPage,
    InjectRequest,
    MemoryPage,
    PatchRequest,
    ResetRequest,
    SearchRequest,
    SearchResponse,
    StatsOut,
    SyncOut,
    SyncRequest,
    TurnRequest,
)
from memlane.server.state import Principal, ServerState
from memlane.transfer import export_lines
from memlane.types import (
    Association,
    Decision,
    Injection,
    Memory,
    MemoryType,
    MemoryVersion,
    SessionState,
    Status,
    Turn,
)

Caller = Annotated[Principal, Depends(caller)]
Owner = Annotated[
    str | None,
    Query(
        min_length=1,
        pattern=r"\S",
        description="Owner scope (default: [scope] owner, else default).",
        json_schema_extra=OWNER_SCHEMA,
    ),
]
Agent = Annotated[
    str | None,
    Query(min_length=1, pattern=r"\S", description="Agent scope (omit for all of the owner)."),
]
ProjectQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_PROJECT_CHARS,
        pattern=r"\S",
        description="A project's identity: its memories and the owner's global ones (omit: "
        "every project's).",
    ),
]
Limit = Annotated[int, Query(ge=1, le=1000)]
Cursor = Annotated[
    str | None, Query(pattern=r"^[0-9]{1,9}$", description="next_cursor of the previous page.")
]
SessionId = Annotated[str, Path(min_length=1, pattern=r"\S", description="The session's id.")]


def _answer(body: dict[str, Any]) -> JSONResponse:
    """``body`` (built from the results' ``to_dict``, the one serialisation of each result type)
    as the response, serialised once. Returned from the busy routes (inject, search, add)
    instead of the result itself: FastAPI would validate the engine's result against the
    response model again (every memory's fields, datetimes parsed back) and then serialise it
    through the same ``to_dict``; the route's ``response_model`` still documents the answer."""
    return JSONResponse(body)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise InvalidArgument(f"cursor {cursor!r} is not one this server gave")
    return int(cursor)


def router(state: ServerState) -> APIRouter:
    api = APIRouter()

    @api.post("/memories", response_model=AddResponse, tags=["memories"])
    def add(body: Annotated[AddRequest, Body()], who: Caller) -> JSONResponse:
        """Offer one memory (``memory``) or a batch (``memories``) to the write path; each
        result says its decision, the similarity and the memory it matched."""
        owner = scope(who, body.owner)
        offered = [body.memory] if isinstance(body, AddOne) else body.memories
        items = [
            MemoryInput(
                m.content, m.type, owner, m.agent, m.session, m.importance, m.source, m.metadata,
                body.project,
            )
            for m in offered
        ]  # fmt: skip
        results = state.engine.add_many(items)
        return _answer({"results": [r.to_dict() for r in results]})

    @api.get("/memories", response_model=MemoryPage, tags=["memories"])
    def list_memories(
        who: Caller,
        owner: Owner = None,
        agent: Agent = None,
        type: MemoryType | None = None,
        status: Status = Status.ACTIVE,
        limit: Limit = 50,
        cursor: Cursor = None,
        project: ProjectQuery = None,
    ) -> MemoryPage:
        """Memories of the scope (active unless ``status`` says; with ``project``, that
        project's and the owner's global ones), newest first, a page at a time."""
        start = _offset(cursor)
        rows = state.engine.list(
            owner=scope(who, owner),
            agent=agent,
            type=type,
            limit=start + limit + 1,
            status=status,
            project=project,
        )
        page = rows[start : start + limit]
        more = len(rows) > start + limit
        return MemoryPage(items=list(page), next_cursor=str(start + limit) if more else None)

    @api.get("/memories/{memory_id}", response_model=Memory, tags=["memories"])
    def get(memory_id: str, who: Caller, owner: Owner = None, agent: Agent = None) -> Memory:
        return state.engine.get(memory_id, owner=scope(who, owner), agent=agent)

    @api.patch("/memories/{memory_id}", response_model=Memory, tags=["memories"])
    def patch(
        memory_id: str, body: PatchRequest, who: Caller, owner: Owner = None, agent: Agent = None
    ) -> Memory:
        """New text for a memory (the old text is kept in its history)."""
        memory = state.engine.update(memory_id, body.content, owner=scope(who, owner), agent=agent)
        return memory

    @api.delete("/memories/{memory_id}", response_model=Memory, tags=["memories"])
    def forget(
        memory_id: str,
        who: Caller,
        owner: Owner = None,
        agent: Agent = None,
        purge: Annotated[
            bool,
            Query(description="Delete it for real (text, history, log rows, index entries)."),
        ] = False,
    ) -> Memory:
        """Forget a memory (kept on disk with its history; never searched or injected); with
        ``purge=true`` delete it and every row holding its text (the memory as it was is
        returned)."""
        if purge:
            owner_ = scope(who, owner)
            memory = state.engine.get(memory_id, owner=owner_, agent=agent, include_inactive=True)
            state.engine.purge(memory.id, owner=owner_, agent=agent)
            return memory
        return state.engine.forget(memory_id, owner=scope(who, owner), agent=agent)

    @api.post("/memories/{memory_id}/restore", response_model=Memory, tags=["memories"])
    def restore(memory_id: str, who: Caller, owner: Owner = None) -> Memory:
        """Undo a forget: the forgotten memory is searched and injected again."""
        return state.engine.restore(memory_id, owner=scope(who, owner))

    @api.get("/memories/{memory_id}/history", response_model=list[MemoryVersion], tags=["memories"])
    def history(
        memory_id: str, who: Caller, owner: Owner = None, agent: Agent = None
    ) -> list[MemoryVersion]:
        rows = state.engine.history(memory_id, owner=scope(who, owner), agent=agent)
        return rows

    @api.get(
        "/memories/{memory_id}/associations",
        response_model=list[Association],
        tags=["memories"],
    )
    def associations(
        memory_id: str, who: Caller, owner: Owner = None, agent: Agent = None
    ) -> list[Association]:
        rows = state.engine.associations(memory_id, owner=scope(who, owner), agent=agent)
        return rows

    @api.post("/search", response_model=SearchResponse, tags=["read"])
    def search(body: SearchRequest, who: Caller) -> JSONResponse:
        """Hybrid search; each hit has its fused score and the rank in each leg that found it."""
        hits = state.engine.search(
            body.query,
            owner=scope(who, body.owner),
            agent=body.agent,
            limit=body.limit,
            types=body.types,
            mode=body.mode,
            include_inactive=body.include_inactive,
            project=body.project,
        )
        return _answer({"hits": [h.to_dict() for h in hits]})

    @api.post("/inject", response_model=Injection, tags=["read"])
    def inject(body: InjectRequest, who: Caller) -> JSONResponse:
        """The block to insert before this turn, its items with scores, and what was left out
        (``skipped``, by reason)."""
        if body.pinned_only:
            pinned = state.engine.inject_pinned(
                body.session,
                owner=scope(who, body.owner),
                agent=body.agent,
                max_chars=body.max_chars,
                project=body.project,
            )
            return _answer(pinned.to_dict())
        assert body.text is not None  # InjectRequest: text is required without pinned_only
        result = state.engine.inject(
            body.session,
            body.text,
            owner=scope(who, body.owner),
            agent=body.agent,
            recent=body.recent,
            max_chars=body.max_chars,
            known=body.known,
            project=body.project,
        )
        return _answer(result.to_dict())

    @api.post("/turn", response_model=Turn, tags=["read"])
    def turn(body: TurnRequest, who: Caller) -> JSONResponse:
        """One model call's memory under the turn model every door shares: the turn's block
        (decided once, the same on every call of the turn: ``repeat``), and for ``kept:
        false`` the earlier turns' blocks still within the window (``earlier``), to put back
        where they were (:meth:`memlane.MemoryEngine.turn`)."""
        result = state.engine.turn(
            body.session,
            body.message,
            kept=body.kept,
            position=body.position,
            owner=scope(who, body.owner),
            agent=body.agent,
            project=body.project,
            recent=body.recent,
            max_chars=body.max_chars,
            known=body.known,
            key=body.key,
        )
        return _answer(result.to_dict())

    @api.get("/sessions/{session_id}", response_model=SessionState, tags=["sessions"])
    def session(
        session_id: SessionId, who: Caller, owner: Owner = None, agent: Agent = None
    ) -> SessionState:
        return state.engine.session(session_id, owner=scope(who, owner), agent=agent)

    @api.post("/sessions/{session_id}/reset", response_model=SessionState, tags=["sessions"])
    def reset(session_id: SessionId, body: ResetRequest, who: Caller) -> SessionState:
        """Forget what the session was shown (after compaction, /clear or a resume)."""
        owner = scope(who, body.owner)
        return state.engine.reset_session(session_id, body.reason, owner=owner)

    @api.post("/sessions/{session_id}/sync", response_model=SyncOut, tags=["sessions"])
    def sync(session_id: SessionId, body: SyncRequest, who: Caller) -> SyncOut:
        """Compare the session's tracking with one request of the client to its model
        (``text``: its memlane blocks): ``block`` holds the memories shown within the window
        that the request lacks (compressed away), for the client's hook to add to that
        request; those it holds stay shown while the history holds them."""
        owner = scope(who, body.owner)
        done = state.engine.sync_session(session_id, body.text, owner=owner, agent=body.agent)
        return SyncOut(state=done.state, gone=list(done.gone), kept=list(done.kept),
                       block=done.block)  # fmt: skip

    @api.get("/dedup-log", response_model=DedupLogPage, tags=["read"])
    def dedup_log(
        who: Caller,
        owner: Owner = None,
        decision: Decision | None = None,
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> DedupLogPage:
        """The write path's decisions, newest first."""
        start = _offset(cursor)
        rows = state.engine.dedup_log(
            owner=scope(who, owner), decision=decision, limit=start + limit + 1
        )
        more = len(rows) > start + limit
        return DedupLogPage(
            items=rows[start : start + limit],
            next_cursor=str(start + limit) if more else None,
        )

    @api.get(
        "/export",
        tags=["memories"],
        response_class=PlainTextResponse,
        responses={200: {"content": {"application/jsonl": {"schema": {"type": "string"}}}}},
    )
    def export(who: Caller, owner: Owner = None) -> PlainTextResponse:
        """Every memory of the owner (the server's token without ``owner``: every owner) in the
        memlane-export format (JSON Lines, docs/security.md); ``memlane import`` restores it."""
        name = owner if who.owner is None and owner is not None else None
        if who.owner is not None:
            name = scope(who, owner)
        body = "".join(line + "\n" for line in export_lines(state.engine, name))
        return PlainTextResponse(body, media_type="application/jsonl")

    @api.get("/stats", response_model=StatsOut, tags=["service"])
    def stats(who: Caller) -> StatsOut:
        """Memories by owner, type and status (of the token's owner when bound); store size."""
        stats = state.engine.stats(who.owner)
        return StatsOut(
            **stats.to_dict(),
            uptime_s=round(state.uptime_s(), 3),
            llm=state.engine.llm_stats() if who.owner is None else {},
        )

    return api
