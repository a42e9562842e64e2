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
from memlane.server.auth import AuthError, caller
from memlane.server.models import HealthOut, Problem
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
    404: "Not Found",
    405: "Method Not Allowed",
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
    body = Problem(
        title=title or _TITLES.get(status, "Error"), status=status, detail=detail, errors=errors
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type="application/problem+json",
        headers=headers,
    )


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        out.append({"field": ".".join(loc) or "body", "message": str(err.get("msg", ""))})
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
        docs_url=None,  # served below from the swagger-ui-bundle package: no CDN
        redoc_url=None,
        openapi_url=None,  # served below, behind the token
    )
    app.state.memlane = state
    server = state.server
    if server.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(server.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
        )
    app.add_middleware(BodyLimit, limit=server.max_body_bytes)

    @app.exception_handler(MemlaneError)
    async def _memlane(request: Request, exc: MemlaneError) -> JSONResponse:
        status = status_of(exc)
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
        errors = _field_errors(exc)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return problem(422, detail or "invalid request", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))

    @app.exception_handler(AuthError)
    async def _auth(request: Request, exc: AuthError) -> Response:
        if not request.url.path.startswith("/v1") and "text/html" in request.headers.get(
            "accept", ""
        ):
            return RedirectResponse("/login", status_code=303)  # a page: sign in first
        return problem(401, str(exc), headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s", request.method, request.url.path)
        return problem(500, f"internal error ({type(exc).__name__}); see the server's log")

    @app.get("/health", response_model=HealthOut, tags=["service"])
    def health() -> JSONResponse:
        """Ready once the engine is open and its model loaded (no token needed)."""
        body = HealthOut(
            status="ready" if state.ready else "starting",
            model=state.engine.embedder.name,
            config_error=state.config_error,
        )
        return JSONResponse(body.model_dump(), status_code=200 if state.ready else 503)

    guarded = [Depends(caller)]
    _add_docs(app, guarded)
    app.include_router(review_routes.router(state), prefix="/v1", dependencies=guarded)
    app.include_router(routes.router(state), prefix="/v1", dependencies=guarded)
    app.include_router(settings_routes.router(state), prefix="/v1", dependencies=guarded)
    app.include_router(pages.router(state), dependencies=guarded)
    app.include_router(pages.login_router())
    app.mount("/static", StaticFiles(directory=str(pages.HERE / "static")), name="static")
    return app


def _add_docs(app: FastAPI, guarded: list[Any]) -> None:
    """``/docs``: Swagger UI over ``/openapi.json``, its script and style served from the
    ``swagger-ui-bundle`` package (nothing fetched from the internet)."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs-static", StaticFiles(directory=str(swagger_ui_path)), name="docs-static")

    @app.get("/openapi.json", include_in_schema=False, dependencies=guarded)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=guarded)
    def docs() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="memlane API",
            swagger_js_url="/docs-static/swagger-ui-bundle.js",
            swagger_css_url="/docs-static/swagger-ui.css",
            swagger_favicon_url="/docs-static/favicon-32x32.png",
        )
