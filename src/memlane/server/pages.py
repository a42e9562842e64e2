"""The operator's web pages, server-rendered (Jinja2) with a little plain JavaScript
(``static/memlane.js``) that calls the same ``/v1`` API; nothing is fetched from the internet.
Every page has the owner and agent pickers (kept in the URL: ``?owner=&agent=``).

- ``/`` overview: owners and agents with counts by type and status (each a link to the list),
  write decisions per day, sessions with their injections, the store's size and backend, the
  model, where the settings come from;
- ``/settings``: the injection defaults of every agent, the agents with an override, the
  write-path thresholds; ``/agents/{name}``: one agent ("Using default" / "Override", revert);
- ``/memories``: search (score, the legs that found each hit), filters, count, sorting, paging;
  ``/memories/{id}``: a memory, its history and associations (as texts), forget and restore;
- ``/sessions``: the owner's sessions, recent first; ``/sessions/{id}``: each turn, what it
  injected and why candidates were left out; reset; ``?explain=<message>``: the explain view,
  each candidate an injection of that message would weigh with its legs' ranks and scores and
  the rule that kept or cut it, in words (nothing injected or recorded);
- ``/dedup-log``: decisions in words, the two texts side by side with the changed words marked;
- ``/login``: the token, checked and kept by the server in an ``HttpOnly; SameSite=Strict``
  cookie for the pages; ``/favicon.ico``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from memlane.config import InjectionSettings
from memlane.errors import NotFound
from memlane.server import page_data
from memlane.server.auth import COOKIE, caller, check_token, cookie_value, require_admin, scope
from memlane.server.settings_routes import AGENT_PATTERN
from memlane.server.state import Principal, ServerState
from memlane.types import Decision, MemoryType, SearchHit, Status

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["local"] = page_data.local_time
templates.env.filters["decision_words"] = page_data.decision_words
templates.env.filters["skip_words"] = page_data.skip_words
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

    def pickers(who: Principal, owner: str | None, agent: str | None) -> dict[str, Any]:
        """The owner and agent pickers of every page: the owners the caller may see (most
        memories first), the chosen owner (asked for, else the token's, else ``[scope] owner``,
        else ``"default"``: the owner rule of every door) and the agents of that owner."""
        engine = state.engine
        owners = page_data.overview(engine.counts(who.owner), engine.agent_counts())
        owners = [o for o in owners if who.owner is None or o["owner"] == who.owner]
        # the owner asked for, else the token's, else the owner rule's ([scope] owner, else
        # "default"), as in every door; the overview lists every owner the caller may see
        chosen = engine.owner_of(scope(who, owner or None))
        agents: dict[str, int] = next((o["agents"] for o in owners if o["owner"] == chosen), {})
        names = [o["owner"] for o in owners]
        return {
            # the chosen owner is in the picker even before it has a memory
            "owners": names if chosen in names else [chosen, *names],
            "owner": chosen,
            "agents": sorted(a for a in agents if a),
            "agent": agent or "",
            "overview_rows": owners,
        }

    def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.update(request=request, config_error=state.config_error)
        context.setdefault("owners", [])
        context.setdefault("agents", [])
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def settings_page(request: Request, who: Principal, agent: str | None) -> HTMLResponse:
        effective, overrides = state.injection(agent)
        agents = sorted(a for a, entry in state.settings.agents.items() if entry.injection)
        context = pickers(who, None, None)
        context.update(settings_agent=agent, agent="")
        return render(
            request,
            "settings.html",
            values=effective.model_dump(mode="json"),
            defaults=state.settings.injection.model_dump(mode="json"),
            overrides=overrides,
            override_agents=agents,
            sections=SECTIONS,
            ambient=AMBIENT,
            types=[t.value for t in MemoryType],
            dedup=state.settings.dedup,
            limits=_limits(),
            agent_pattern=AGENT_PATTERN,
            **context,
        )

    @pages.get("/", response_class=HTMLResponse)
    def overview(
        request: Request, who: Caller, owner: Text = None, agent: Text = None
    ) -> HTMLResponse:
        context = pickers(who, owner, agent)
        chosen = context["owner"]
        engine = state.engine
        log = engine.dedup_log(owner=chosen, limit=2000)
        sessions = engine.session_list(chosen, limit=20)
        return render(
            request,
            "overview.html",
            days=page_data.decisions_by_day(log)[:14],
            decisions=[d.value for d in Decision],
            sessions=sessions,
            size=page_data.human_bytes(engine.size_bytes()) if who.owner is None else None,
            backend=engine.settings.store.backend,
            model=engine.model_name,
            config=page_data.config_source(engine.settings.home) if who.owner is None else None,
            **context,
        )

    @pages.get("/settings", response_class=HTMLResponse)
    def settings(request: Request, who: Caller) -> HTMLResponse:
        require_admin(who)
        return settings_page(request, who, None)

    @pages.get("/agents/{name}", response_class=HTMLResponse)
    def agent_settings(request: Request, name: str, who: Caller) -> HTMLResponse:
        require_admin(who)
        if not re.fullmatch(AGENT_PATTERN, name):
            raise NotFound(f"no agent {name!r}: names are letters, digits, _ and -")
        return settings_page(request, who, name)

    @pages.get("/memories", response_class=HTMLResponse)
    def memories(
        request: Request,
        who: Caller,
        q: Text = None,
        owner: Text = None,
        agent: Text = None,
        type: Text = None,
        status: Text = None,
        sort: Text = None,
        page: Annotated[int, Query(ge=1)] = 1,
    ) -> HTMLResponse:
        context = pickers(who, owner, agent)
        chosen = context["owner"]
        hits: list[SearchHit] = []
        if q:
            hits = state.engine.search(
                q, owner=chosen, agent=agent or None, types=[type] if type else None, limit=50
            )
            rows: list[Any] = [h.memory for h in hits]
        else:
            rows = state.engine.list(
                owner=chosen,
                agent=agent or None,
                type=type or None,
                limit=LIST_CAP,
                status=status or "active",
            )
            key, reverse = SORTS.get(sort or "newest", SORTS["newest"])
            rows = sorted(rows, key=key, reverse=reverse)
        shown, page, pages_n = page_data.page_of(hits if q else rows, page)
        return render(
            request,
            "memories.html",
            q=q or "",
            type=type or "",
            types=[t.value for t in MemoryType],
            status=status or "active",
            statuses=[s.value for s in Status],
            sort=sort or "newest",
            sorts=list(SORTS),
            hits=shown if q else [],
            rows=[] if q else shown,
            total=len(hits if q else rows),
            capped=not q and len(rows) >= LIST_CAP,
            page=page,
            pages=pages_n,
            **context,
        )

    @pages.get("/memories/{memory_id}", response_class=HTMLResponse)
    def memory(request: Request, memory_id: str, who: Caller, owner: Text = None) -> HTMLResponse:
        context = pickers(who, owner, None)
        chosen = context["owner"]
        m = state.engine.get(memory_id, owner=chosen, include_inactive=True)
        links = state.engine.associations(memory_id, owner=chosen)
        others = {a.source_id for a in links} | {a.target_id for a in links}
        texts = {
            mid: x.content for mid, x in state.engine.get_many(list(others), owner=chosen).items()
        }
        return render(
            request,
            "memory.html",
            m=m,
            history=state.engine.history(memory_id, owner=chosen),
            links=links,
            texts=texts,
            **context,
        )

    @pages.get("/sessions", response_class=HTMLResponse, response_model=None)
    def sessions(
        request: Request, who: Caller, id: Text = None, owner: Text = None, agent: Text = None
    ) -> HTMLResponse | RedirectResponse:
        context = pickers(who, owner, agent)
        if id:  # the old form's address: the session's own page
            return RedirectResponse(f"/sessions/{quote(id)}?owner={quote(context['owner'])}", 303)
        rows = state.engine.session_list(context["owner"], limit=LIST_CAP)
        return render(request, "sessions.html", rows=rows, **context)

    @pages.get("/sessions/{session_id}", response_class=HTMLResponse)
    def session(
        request: Request, session_id: str, who: Caller, owner: Text = None, explain: Text = None
    ) -> HTMLResponse:
        context = pickers(who, owner, None)
        chosen = context["owner"]
        s = state.engine.session(session_id, owner=chosen)
        events = state.engine.session_events(session_id, owner=chosen, limit=100)
        if s.updated_at is None and not events:
            raise NotFound(f"no session {session_id!r} for owner {chosen!r}")
        ids = {mid for e in events for mid in e["memory_ids"]} | set(s.injected)
        texts = {
            mid: m.content for mid, m in state.engine.get_many(list(ids), owner=chosen).items()
        }
        # the explain view: the cut's verdict on each candidate for a message (nothing recorded)
        verdicts = None
        if explain and explain.strip():
            verdicts = state.engine.explain_injection(explain, owner=chosen)
        return render(
            request,
            "session.html",
            s=s,
            events=events,
            texts=texts,
            explain=explain or "",
            verdicts=verdicts,
            legs=page_data.legs_text,
            **context,
        )

    @pages.get("/dedup-log", response_class=HTMLResponse)
    def dedup_log(
        request: Request,
        who: Caller,
        decision: Text = None,
        owner: Text = None,
        page: Annotated[int, Query(ge=1)] = 1,
    ) -> HTMLResponse:
        context = pickers(who, owner, None)
        rows = state.engine.dedup_log(
            owner=context["owner"], decision=decision or None, limit=LIST_CAP
        )
        shown, page, pages_n = page_data.page_of(rows, page)
        diffs = {e.id: page_data.changed_words(e.existing_text or "", e.new_text) for e in shown}
        return render(
            request,
            "dedup_log.html",
            rows=shown,
            diffs=diffs,
            total=len(rows),
            page=page,
            pages=pages_n,
            decision=decision or "",
            decisions=[d.value for d in Decision],
            **context,
        )

    return pages


#: Rows a list page reads at most (counted, sorted and paged on the server).
LIST_CAP = 5000
#: The memory list's orders: name -> (key, descending).
SORTS: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "newest": (lambda m: m.updated_at, True),
    "oldest": (lambda m: m.updated_at, False),
    "type": (lambda m: (m.type.value, m.content.lower()), False),
    "importance": (lambda m: m.importance, True),
    "text": (lambda m: m.content.lower(), False),
}


def not_found_page(request: Request, status: int, detail: str) -> HTMLResponse:
    """The HTML page of an error on a page (an unknown address, id or session)."""
    context = {"request": request, "status": status, "detail": detail, "owners": [], "agents": []}
    return templates.TemplateResponse(request, "error.html", context, status_code=status)


def wants_page(request: Request) -> bool:
    """A browser asking for a page (not ``/v1`` nor a script asking for JSON)."""
    path = request.url.path
    return not path.startswith(("/v1", "/openapi.json", "/static")) and "text/html" in (
        request.headers.get("accept", "")
    )


def login_router(state: ServerState) -> APIRouter:
    """``/login``: reachable without a token. ``POST /login`` (a form: ``token=...``) checks the
    token and sets the cookie (303 to ``/``), or answers 401 with the form again."""
    open_pages = APIRouter(include_in_schema=False)

    @open_pages.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")

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
