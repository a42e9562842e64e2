"""The FastAPI application: error mapping (RFC 9457 problem details), access (loopback, bearer
tokens, owner-bound tokens), the body size limit, ``/health``, and the routers.

Every route that calls the engine is a plain ``def``: FastAPI runs it in its thread pool, so the
synchronous engine never blocks the event loop (the store serialises its own access).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.errors import (
    ConfigError,
    InvalidArgument,
    InvalidMemory,
    LLMError,
    MemlaneError,
    NotFound,
    StoreBusy,
)
from memlane.server import pages, review_routes, routes, settings_routes
from memlane.server.auth import AuthError, caller, principal_of
from memlane.server.guard import CatchAll, Methods, SameOrigin, allowed_hosts
from memlane.server.models import FieldError, HealthOut, Problem, printable
from memlane.server.openapi import truthful
from memlane.server.state import ServerState

log = logging.getLogger("memlane.server")

#: Seconds a client should wait before retrying after a 503 (the store was busy).
RETRY_AFTER_S = 1


def status_of(exc: MemlaneError) -> int:
    """The HTTP status of a memlane error (docs/server.md has the table)."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, InvalidMemory | InvalidArgument | ConfigError):
        return 422
    if isinstance(exc, StoreBusy):
        return 503
    if isinstance(exc, LLMError):
        return 502
    return 500  # StoreError, EmbeddingError and any other: the service failed, not the request


_TITLES = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    422: "Unprocessable Content",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def problem(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    if errors is not None:  # a message may quote the input: never a lone surrogate
        errors = [{k: printable(str(v)) for k, v in e.items()} for e in errors]
    body = Problem(
        title=title or _TITLES.get(status, "Error"),
        status=status,
        detail=printable(detail),
        errors=errors,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type="application/problem+json",
        headers=headers,
    )


def _field_errors(exc: RequestValidationError, content_type: str = "") -> list[dict[str, Any]]:
    """Each of pydantic's errors as ``{"field", "message"}``: the field a dotted path (``body``
    for the whole body), the message what is wrong and the fix. FastAPI's own errors are
    reworded: a malformed JSON body (its ``loc`` holds the character position, not a field), a
    body that was not read as JSON (no ``Content-Type: application/json``), a value error of a
    model validator (:class:`~memlane.server.models.FieldError`: its field, no "Value error, ")."""
    out = []
    for err in exc.errors():
        kind = err.get("type")
        ctx = err.get("ctx") or {}
        loc = [
            str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "one", "batch")
        ]
        message = str(err.get("msg", ""))
        if kind == "json_invalid":
            where = next((p for p in err.get("loc", ()) if isinstance(p, int)), None)
            at = f" at character {where}" if where is not None else ""
            why = f" ({ctx['error']}{at})" if ctx.get("error") else at
            out.append(
                {"field": "body", "message": f"is not valid JSON{why}: send one JSON object"}
            )
            continue
        if not loc and kind in ("model_attributes_type", "dict_type", "missing"):
            if "json" not in content_type.lower():
                sent = f"Content-Type: {content_type}" if content_type else "no Content-Type"
                message = (
                    f"was not read as JSON ({sent}): send a JSON object with "
                    "Content-Type: application/json"
                )
            else:
                message = f"must be a JSON object, got {type(err.get('input')).__name__}"
            out.append({"field": "body", "message": message})
            continue
        error = ctx.get("error")
        if kind == "value_error" and isinstance(error, FieldError):
            out.append({"field": error.field, "message": error.problem})
            continue
        if kind == "value_error":
            message = message.removeprefix("Value error, ")
        elif kind == "string_pattern_mismatch" and "\\S" in message:
            message = "is empty or blank: give some text"
        elif kind == "string_too_short":
            message = "is empty: give some text"
        elif kind in ("enum", "literal_error"):
            message = f"{message}, got {str(err.get('input'))[:80]!r}"
        out.append({"field": ".".join(loc) or "body", "message": message})
    return out


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413 (by its Content-Length, or counted
    while it streams in)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._refuse(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(413, f"the request body is over {self.limit} bytes")
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass


class FreshSettings:
    """Look at ``memlane.toml``'s stamp (one ``stat``) before each request and reload it when
    it changed: a change saved through another worker process of the same server (or by hand)
    is used by the very next request here, not only at the watcher's next look
    (:meth:`ServerState.check_file`; an invalid file is tried once per change and logged)."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                self.state.check_file()
            except Exception:  # the request goes on with the settings in use
                log.exception("reading memlane.toml")
        await self.app(scope, receive, send)


def _unreadable(cause: BaseException) -> str:
    """Why a body could not be read as JSON (FastAPI's own message says only "error parsing")."""
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not UTF-8 ({cause.reason} at byte {cause.start}); send UTF-8 JSON"
    if isinstance(cause, RecursionError):
        return "the body's JSON is nested too deep to read; flatten it"
    return f"the body is not valid JSON ({type(cause).__name__}); send a JSON object"


def create_app(state: ServerState) -> FastAPI:
    """The application over ``state``; the caller owns the engine (``memlane serve`` closes it
    after uvicorn stops)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.ready = True
        try:
            yield
        finally:
            state.ready = False

    app = FastAPI(
        title="memlane",
        version="1",
        description="Long-term memory for LLM agents. Errors are RFC 9457 problem details.",
        lifespan=lifespan,
        docs_url=None,  # served below from the fastapi-offline package: no CDN
        redoc_url=None,
        openapi_url=None,  # served below, behind the token
    )
    app.state.memlane = state
    server = state.server
    # Innermost first (Starlette wraps each added middleware around the ones before it).
    app.add_middleware(CatchAll, problem=problem)
    app.add_middleware(Methods, routes=lambda: list(app.router.routes), problem=problem)
    if server.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(server.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
        )
    app.add_middleware(
        SameOrigin,
        hosts=allowed_hosts(server.host, server.allowed_hosts),
        cors_origins=server.cors_origins,
        problem=problem,
    )
    app.add_middleware(BodyLimit, limit=server.max_body_bytes)
    app.add_middleware(FreshSettings, state=state)

    @app.exception_handler(MemlaneError)
    async def _memlane(request: Request, exc: MemlaneError) -> Response:
        status = status_of(exc)
        if status == 404 and pages.wants_page(request):  # an unknown id or session on a page
            return pages.not_found_page(request, 404, str(exc))
        headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
        errors = None
        if isinstance(exc, ConfigError):
            errors = [{"field": exc.key, "message": exc.allowed}]
        if status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc)
        return problem(
            status,
            str(exc) or type(exc).__name__,
            title=type(exc).__name__,
            errors=errors,
            headers=headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _field_errors(exc, request.headers.get("content-type", ""))
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return problem(422, detail or "invalid request", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI read no body
            if isinstance(exc.__cause__, _TooLarge):  # counted while streaming (chunked)
                return problem(413, f"the request body is over {server.max_body_bytes} bytes")
            return problem(422, _unreadable(exc.__cause__))
        if exc.status_code == 404 and pages.wants_page(request):  # an unknown page: HTML
            return pages.not_found_page(request, 404, f"No page at {request.url.path}.")
        return problem(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))

    @app.exception_handler(AuthError)
    async def _auth(request: Request, exc: AuthError) -> Response:
        if not request.url.path.startswith("/v1") and "text/html" in request.headers.get(
            "accept", ""
        ):
            return RedirectResponse("/login", status_code=303)  # a page: sign in first
        return problem(401, str(exc), headers={"WWW-Authenticate": "Bearer"})

    @app.get(
        "/health",
        response_model=HealthOut,
        tags=["service"],
        responses={503: {"model": HealthOut, "description": "Starting: not ready yet."}},
    )
    def health(request: Request) -> JSONResponse:
        """Ready once the engine is open and its model loaded (no token needed). Without the
        server's token it says only whether memlane.toml has an error, not which: the message
        may quote a value of the file."""
        try:
            admin = principal_of(state, request).owner is None
        except AuthError:
            admin = False
        error = state.config_error
        body = HealthOut(
            status="ready" if state.ready else "starting",
            model=state.engine.model_name if admin else None,
            config_error=error if admin or error is None else "memlane.toml has an error",
        )
        out = body.model_dump()
        if out["model"] is None:
            del out["model"]
        return JSONResponse(out, status_code=200 if state.ready else 503)

    @app.get("/v1/proof", include_in_schema=False)
    def proof(nonce: str = "") -> JSONResponse:
        """That this server serves this home's store (no token needed; a hook asks before
        it sends its token or a prompt): the HMAC of ``nonce`` and the store id keyed by
        ``<home>/run/secret`` (:func:`memlane.hooks.daemon.proof_of`). The store id itself is
        not answered: the hook knows it from the record."""
        from memlane.hooks.daemon import proof_of, read_secret

        if not 16 <= len(nonce) <= 128 or not nonce.isascii() or not nonce.isalnum():
            return problem(422, "nonce: 16 to 128 letters or digits")
        key = read_secret(state.home)
        if key is None:
            return problem(503, "this server has no proof key (run/secret) yet")
        return JSONResponse({"proof": proof_of(key, nonce, state.engine.store_id)})

    guarded = [Depends(caller)]
    _add_docs(app, guarded)
    app.include_router(review_routes.router(state), prefix="/v1", dependencies=guarded)
    app.include_router(routes.router(state), prefix="/v1", dependencies=guarded)
    app.include_router(settings_routes.router(state), prefix="/v1", dependencies=guarded)
    app.include_router(pages.router(state), dependencies=guarded)
    app.include_router(pages.login_router(state))
    app.mount("/static", StaticFiles(directory=str(pages.HERE / "static")), name="static")
    return app


def _add_docs(app: FastAPI, guarded: list[Any]) -> None:
    """``/docs``: Swagger UI 5 (it renders OpenAPI 3.1, the version FastAPI writes) over
    ``/openapi.json``, its script and style served from the ``fastapi-offline`` package's
    bundled copy (nothing fetched from the internet; swagger-ui-bundle's 4.15 predates 3.1)."""
    from pathlib import Path

    import fastapi_offline
    from fastapi.openapi.docs import get_swagger_ui_html

    assets = Path(fastapi_offline.__file__).resolve().parent / "static"
    app.mount("/docs-static", StaticFiles(directory=str(assets)), name="docs-static")

    document: dict[str, Any] = {}

    @app.get("/openapi.json", include_in_schema=False, dependencies=guarded)
    def openapi() -> JSONResponse:
        if not document:  # built once, on first use (every route is registered by then)
            document.update(
                truthful(
                    app.openapi(),
                    problem=Problem.model_json_schema(),
                    service_paths=frozenset({"/health"}),
                )
            )
        return JSONResponse(document)

    @app.get("/docs", include_in_schema=False, dependencies=guarded)
    def docs() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="memlane API",
            swagger_js_url="/docs-static/swagger-ui-bundle.js",
            swagger_css_url="/docs-static/swagger-ui.css",
            swagger_favicon_url="/favicon.ico",
        )
