"""The operator's web pages, server-rendered (Jinja2) with a little plain JavaScript
(``static/memlane.js``) that calls the same ``/v1`` API; nothing is fetched from the internet.

- ``/`` settings: the injection defaults of every agent, the agents with an override, the
  write-path thresholds; ``/agents/{name}``: one agent ("Using default" / "Override", revert);
- ``/memories``: search (score, the legs that found each hit) and filters; ``/memories/{id}``: a
  memory, its history and associations, forget;
- ``/sessions``: a session's turn, injected memories with their turn, last reset; reset;
- ``/dedup-log``: decisions with the two texts side by side, filter by decision;
- ``/login``: the token, checked and kept by the server in an ``HttpOnly; SameSite=Strict``
  cookie for the pages.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from memlane.config import InjectionSettings
from memlane.errors import NotFound
from memlane.server.auth import COOKIE, caller, check_token, cookie_value, require_admin, scope
from memlane.server.settings_routes import AGENT_PATTERN
from memlane.server.state import Principal, ServerState
from memlane.types import Decision, MemoryType, SearchHit, Status

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
Caller = Annotated[Principal, Depends(caller)]
Text = Annotated[str | None, Query()]

#: The settings form, section by section: (key, label, help).
SECTIONS: list[tuple[str, list[tuple[str, str, str]]]] = [
    (
        "Contextual search",
        [
            ("enabled", "Enabled", "Search the memories for each prompt and inject the best."),
            ("search_limit", "Search limit", "Hits considered per turn."),
            ("max_total", "Max total", "Most memories injected in one turn."),
            ("max_tokens", "Token budget", "Tokens (about 4 characters each); 0 = no budget."),
        ],
    ),
    (
        "Deduplication",
        [
            (
                "semantic_threshold",
                "Semantic threshold",
                "A candidate this similar to one already shown is not injected again.",
            ),
            (
                "context_window_depth",
                "Re-injection delay (turns)",
                "A memory shown is not shown again for this many turns.",
            ),
        ],
    ),
    (
        "History",
        [
            (
                "max_injected_blocks_in_history",
                "Max injected blocks kept in history",
                "0 = ephemeral: injected blocks never stay in the conversation.",
            ),
        ],
    ),
]
AMBIENT = [
    ("ambient_enabled", "Enabled", ""),
    ("pinned_limit", "Per-type limit", "Memories of each checked type injected every turn."),
    ("pinned_sort", "Sort by", ""),
]


def router(state: ServerState) -> APIRouter:
    pages = APIRouter(include_in_schema=False)

    def render(request: Request, name: str, **context: Any) -> HTMLResponse:
        context.update(request=request, config_error=state.config_error)
        return templates.TemplateResponse(request, name, context)

    def settings_page(request: Request, agent: str | None) -> HTMLResponse:
        effective, overrides = state.injection(agent)
        agents = sorted(a for a, entry in state.settings.agents.items() if entry.injection)
        return render(
            request,
            "settings.html",
            agent=agent,
            values=effective.model_dump(mode="json"),
            defaults=state.settings.injection.model_dump(mode="json"),
            overrides=overrides,
            agents=agents,
            sections=SECTIONS,
            ambient=AMBIENT,
            types=[t.value for t in MemoryType],
            dedup=state.settings.dedup,
            limits=_limits(),
        )

    @pages.get("/", response_class=HTMLResponse)
    def settings(request: Request, who: Caller) -> HTMLResponse:
        require_admin(who)
        return settings_page(request, None)

    @pages.get("/agents/{name}", response_class=HTMLResponse)
    def agent_settings(request: Request, name: str, who: Caller) -> HTMLResponse:
        require_admin(who)
        if not re.fullmatch(AGENT_PATTERN, name):
            raise NotFound(f"no agent {name!r}: names are letters, digits, _ and -")
        return settings_page(request, name)

    @pages.get("/memories", response_class=HTMLResponse)
    def memories(
        request: Request,
        who: Caller,
        q: Text = None,
        owner: Text = None,
        agent: Text = None,
        type: Text = None,
        status: Text = None,
    ) -> HTMLResponse:
        scope_owner = scope(who, owner or None)
        hits: list[SearchHit] = []
        if q:
            hits = state.engine.search(
                q, owner=scope_owner, agent=agent or None, types=[type] if type else None
            )
            rows = [h.memory for h in hits]
        else:
            rows = state.engine.list(
                owner=scope_owner,
                agent=agent or None,
                type=type or None,
                limit=200,
                status=status or "active",
            )
        return render(
            request,
            "memories.html",
            q=q or "",
            owner=scope_owner,
            agent=agent or "",
            type=type or "",
            types=[t.value for t in MemoryType],
            status=status or "active",
            statuses=[s.value for s in Status],
            hits=hits,
            rows=rows,
        )

    @pages.get("/memories/{memory_id}", response_class=HTMLResponse)
    def memory(request: Request, memory_id: str, who: Caller, owner: Text = None) -> HTMLResponse:
        scope_owner = scope(who, owner or None)
        m = state.engine.get(memory_id, owner=scope_owner, include_inactive=True)
        return render(
            request,
            "memory.html",
            m=m,
            history=state.engine.history(memory_id, owner=scope_owner),
            links=state.engine.associations(memory_id, owner=scope_owner),
        )

    @pages.get("/sessions", response_class=HTMLResponse)
    def sessions(
        request: Request, who: Caller, id: Text = None, owner: Text = None
    ) -> HTMLResponse:
        scope_owner = scope(who, owner or None)
        session = state.engine.session(id, owner=scope_owner) if id else None
        shown = {}
        if session is not None:
            found = state.engine.store.get_many(scope_owner, list(session.injected))
            shown = {mid: m.content for mid, m in found.items()}
        return render(
            request, "sessions.html", id=id or "", owner=scope_owner, s=session, shown=shown
        )

    @pages.get("/dedup-log", response_class=HTMLResponse)
    def dedup_log(
        request: Request, who: Caller, decision: Text = None, owner: Text = None
    ) -> HTMLResponse:
        scope_owner = scope(who, owner or None)
        rows = state.engine.dedup_log(owner=scope_owner, decision=decision or None, limit=200)
        return render(
            request,
            "dedup_log.html",
            rows=rows,
            owner=scope_owner,
            decision=decision or "",
            decisions=[d.value for d in Decision],
        )

    return pages


def login_router(state: ServerState) -> APIRouter:
    """``/login``: reachable without a token. ``POST /login`` (a form: ``token=...``) checks the
    token and sets the cookie (303 to ``/``), or answers 401 with the form again."""
    open_pages = APIRouter(include_in_schema=False)

    @open_pages.get("/login", response_class=HTMLResponse)
    def login(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "login.html", {"request": request})

    @open_pages.post("/login", response_model=None)
    async def sign_in(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip()
        if not check_token(state, token):
            return templates.TemplateResponse(
                request,
                "login.html",
                {"request": request, "error": "That token is not valid for this server."},
                status_code=401,
            )
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, cookie_value(token), path="/", httponly=True, samesite="strict")
        return response

    return open_pages


def _limits() -> dict[str, dict[str, Any]]:
    """Each injection field's bounds, shown beside its input (the server checks them)."""
    out: dict[str, dict[str, Any]] = {}
    for name, field in InjectionSettings.model_fields.items():
        bounds: dict[str, Any] = {}
        for meta in field.metadata:
            for attr in ("ge", "le", "gt", "lt"):
                if getattr(meta, attr, None) is not None:
                    bounds[attr] = getattr(meta, attr)
        out[name] = bounds
    return out
