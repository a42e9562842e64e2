"""The proxy's ASGI app (Starlette): ``/{upstream}/{path}`` to the upstream of that name in
``[proxy.upstreams]`` (never a URL from the request), for the paths of its API only
(:data:`memlane.proxy.styles.ROUTES`), bodies up to ``[proxy] max_body_bytes``; memory added to
the requests of the routes that carry a conversation (:mod:`memlane.proxy.memory`). The engine
is synchronous: its step runs on the event loop's own thread when this request is the only one
in flight (nothing else to delay; a hop to a worker thread and back costs ~1 ms on a loaded
machine, docs/proxy.md "Speed"), in a worker thread otherwise, so that another request's stream
never waits on it. ``GET /health`` answers ``{"status": "ok", "upstreams":
[...]}``.

Refusals are JSON ``{"error": {"type": "memlane_proxy_error", "message": ...}}`` with 401 (a
token is configured and ``X-Memlane-Token`` does not match), 404 (an unknown upstream or a path
outside its API), 405, 413 (body too large) or 502 / 504 (the upstream could not be reached /
timed out): nothing is forwarded then. What the upstream answers, errors included, reaches the
client unchanged. When memlane itself fails, the request is forwarded without memory and the
failure logged. The client's ``Authorization`` / ``x-api-key`` reach the upstream and nothing
else: no log line, no store row, no error message holds a header.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memlane.engine import MemoryEngine
from memlane.history import INJECTION_BLOCK_PREFIX
from memlane.proxy.forward import send
from memlane.proxy.learning import Learning
from memlane.proxy.memory import Added, Chains, add_memory
from memlane.proxy.settings import ProxySettings
from memlane.proxy.styles import API_PATHS, RESPONSES, Style, route, upstream_url

log = logging.getLogger("memlane.proxy")

#: memlane's own token header (the client's ``Authorization`` is the upstream's).
TOKEN_HEADER = "x-memlane-token"
_MARK = INJECTION_BLOCK_PREFIX.encode("utf-8")


class InFlight:
    """ASGI wrapper counting the HTTP requests in flight (``count``), each from its arrival to
    the last byte of its answer (a stream included)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.count = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.count += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.count -= 1


class TooLarge(Exception):
    """The request body passed ``[proxy] max_body_bytes``."""


def refuse(status: int, message: str, **headers: str) -> JSONResponse:
    """A refusal of the proxy itself (never an upstream's answer)."""
    body = {"error": {"type": "memlane_proxy_error", "message": message}}
    return JSONResponse(body, status_code=status, headers=headers or None)


def serialize(body: Any) -> bytes:
    """The one serialisation of every request memory was considered for (compact, UTF-8,
    the fields in the client's order): the same history gives the same bytes turn after turn."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused past ``limit`` bytes (by its Content-Length or as it comes)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    chunks = bytearray()
    async for chunk in request.stream():
        chunks += chunk
        if len(chunks) > limit:
            raise TooLarge
    return bytes(chunks)


def create_app(
    engine: MemoryEngine | None,
    settings: ProxySettings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> InFlight:
    """The proxy over ``engine`` (``None``: no memory, a plain pass-through) with ``settings``;
    ``transport``: httpx's (tests). An ASGI app (a Starlette app in :class:`InFlight`)."""
    chains = Chains()
    timeout = httpx.Timeout(
        settings.read_timeout_s, connect=settings.connect_timeout_s, pool=settings.connect_timeout_s
    )
    state: dict[str, httpx.AsyncClient] = {}
    learning = None
    if settings.learn and engine is not None:
        if engine.llm is None:
            log.warning("proxy: [proxy] learn is on but no [llm] is configured: not learning")
        else:
            learning = Learning(engine)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        async with httpx.AsyncClient(
            timeout=timeout, limits=limits, transport=transport, follow_redirects=False
        ) as client:
            state["client"] = client
            try:
                yield
            finally:
                if learning is not None:
                    await anyio.to_thread.run_sync(learning.close)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "upstreams": sorted(settings.upstreams)})

    async def proxy(request: Request) -> Response:
        started = time.perf_counter()
        name, path = request.path_params["upstream"], request.path_params["path"]
        if settings.token and not hmac.compare_digest(
            request.headers.get(TOKEN_HEADER, "").encode(), settings.token.encode()
        ):
            return refuse(401, f"this proxy needs its token in the {TOKEN_HEADER} header")
        upstream = settings.upstreams.get(name)
        if upstream is None:
            known = ", ".join(sorted(settings.upstreams)) or "none"
            return refuse(
                404,
                f"no upstream named {name!r} (configured: {known}; add it as "
                f"[proxy.upstreams.{name}] with url and api in memlane.toml)",
            )
        known_path, style, allowed = route(upstream.api, request.method, path)
        if not known_path or any(part in (".", "..") for part in path.split("/")):
            return refuse(
                404,
                f"/{name}/{path} is not a path of the {upstream.api} API this proxy forwards "
                f"({API_PATHS[upstream.api]})",
            )
        if not allowed:
            return refuse(405, f"{request.method} is not allowed on /{name}/{path}")
        try:
            body = await read_body(request, settings.max_body_bytes)
        except TooLarge:
            return refuse(
                413,
                f"the request body is larger than [proxy] max_body_bytes = "
                f"{settings.max_body_bytes}; nothing was forwarded",
            )
        except ClientDisconnect:
            return Response(status_code=499)
        added: Added | None = None
        raw = body
        memory_ms = 0.0
        if style is not None and engine is not None and settings.inject:
            before = time.perf_counter()
            alone = wrapped.count <= 1
            body, added = await _with_memory(engine, style, body, request, name, chains, alone)
            memory_ms = (time.perf_counter() - before) * 1000.0
        url = upstream_url(upstream.api, upstream.url, path)
        if request.url.query:
            url += "?" + request.url.query
        watch = None
        if style is RESPONSES and added is not None:
            session = added.session
            watch = lambda rid: chains.add(rid, session)  # noqa: E731
        try:
            response = await send(
                state["client"], request.method, url, request.headers, body, watch
            )
        except httpx.TimeoutException:
            return refuse(504, f"upstream {name!r} did not answer in time")
        except httpx.TransportError as exc:
            return refuse(502, f"upstream {name!r} could not be reached ({type(exc).__name__})")
        if learning is not None and style is not None and added is not None:
            scope = {k: v for k, v in request.headers.items() if k.startswith("x-memlane-")}
            learning.submit(style, raw, scope, added)
        log.info(
            "proxy %s /%s/%s -> %d memory=%s memory_ms=%.1f elapsed_ms=%.1f",
            request.method,
            name,
            path,
            response.status_code,
            _describe(added),
            memory_ms,
            (time.perf_counter() - started) * 1000.0,
        )
        return response

    methods = ["GET", "POST", "DELETE", "PUT", "PATCH"]
    wrapped = InFlight(
        Starlette(
            routes=[
                Route("/health", health, methods=["GET"]),
                Route("/{upstream}/{path:path}", proxy, methods=methods),
            ],
            lifespan=lifespan,
        )
    )
    return wrapped


async def _with_memory(
    engine: MemoryEngine,
    style: Style,
    raw: bytes,
    request: Request,
    name: str,
    chains: Chains,
    alone: bool,
) -> tuple[bytes, Added | None]:
    """``raw`` with memory added (serialised by :func:`serialize`), or as it came when it is
    not a JSON object or already holds memlane blocks (the client runs memlane's hooks).
    ``alone``: no other request in flight, the engine runs on this thread (the module
    docstring)."""
    if _MARK in raw:
        return raw, None
    try:
        body = json.loads(raw)
    except ValueError:
        return raw, None  # the upstream says what is wrong with it
    if not isinstance(body, dict):
        return raw, None
    original = serialize(body)
    headers = {k: v for k, v in request.headers.items() if k.startswith("x-memlane-")}
    try:
        if alone:
            added = add_memory(engine, style, body, headers, name, chains)
        else:
            added = await anyio.to_thread.run_sync(
                add_memory, engine, style, body, headers, name, chains
            )
    except Exception as exc:  # a memory layer never takes the model away
        log.warning(
            "proxy: memory left out of this request to %r (%s: %s)",
            name,
            type(exc).__name__,
            exc,
        )
        return original, None
    return serialize(body), added


def _describe(added: Added | None) -> str:
    if added is None:
        return "none"
    what = "repeat" if added.repeat else "new"
    reset = f",reset={added.reset}" if added.reset else ""
    return f"{added.session}:{what},blocks={added.blocks}{reset}"
