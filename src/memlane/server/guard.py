"""ASGI middleware that guards ``memlane serve`` against hostile web pages and hostile input
(issue #24; docs/security.md):

- :class:`SameOrigin`: the Host header must name this server (loopback names, ``[server]
  host`` and ``[server] allowed_hosts``; 421 otherwise), which defeats DNS rebinding; a
  state-changing request (not GET/HEAD/OPTIONS) sent by a browser from another site
  (``Sec-Fetch-Site: same-site`` or ``cross-site``, or an ``Origin`` that is not this server's
  nor one of ``[server] cors_origins``) is refused with 403 before any route runs;
- :class:`Methods`: ``OPTIONS`` answers 204 with the path's real ``Allow``, a method the path
  does not have 405 with the same ``Allow``;
- :class:`CatchAll`: an unexpected error is a 500 problem+json, logged with its traceback, and
  the keep-alive connection stays usable (an exception reaching uvicorn closes it without
  ``Connection: close``, and the client's next request fails with ECONNRESET).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("memlane.server")

#: Host names that always reach a server on this machine (RFC 6761 ``localhost``, the loopback
#: addresses).
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: Addresses that mean "every interface": they name no host a client would send.
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Problem = Callable[..., Response]


def host_name(value: str) -> str:
    """The name in a Host header (or a URL's netloc), lower case, without port or brackets:
    ``[::1]:8765`` -> ``::1``, ``LocalHost:80`` -> ``localhost``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") > 1:  # a bare IPv6 address
        return value
    return value.rsplit(":", 1)[0] if ":" in value else value


def allowed_hosts(bind_host: str, extra: Collection[str]) -> frozenset[str] | None:
    """The host names requests may name: loopback, the bound host unless a wildcard, and
    ``extra`` (``[server] allowed_hosts``); None when ``extra`` holds ``"*"`` (any host)."""
    if "*" in extra:
        return None
    names = set(LOOPBACK_NAMES) | {host_name(h) for h in extra}
    if host_name(bind_host) not in _WILDCARDS:
        names.add(host_name(bind_host))
    return frozenset(names)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class SameOrigin:
    """Refuse requests for another host (421) and cross-site writes (403); see the module."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: frozenset[str] | None,
        cors_origins: Collection[str],
        problem: Problem,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.cors = {o.rstrip("/").lower() for o in cors_origins}
        self.problem = problem

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> Response | None:
        host = _header(scope, b"host")
        if self.hosts is not None and host is not None and host_name(host) not in self.hosts:
            return self.problem(
                421,
                "this server does not answer for that Host name; add it to [server] "
                "allowed_hosts if clients really use it (a web page's DNS rebinding uses "
                "names like it)",
                title="Misdirected Request",
            )
        if scope["method"] in _SAFE_METHODS:
            return None
        origin = (_header(scope, b"origin") or "").rstrip("/").lower()
        if origin and origin in self.cors:
            return None
        site = (_header(scope, b"sec-fetch-site") or "").lower()
        # The Origin's host[:port] against the Host header (the scheme may differ behind a TLS
        # proxy; a page of another port or name is another origin).
        netloc = origin.split("://", 1)[-1]
        if site in ("same-site", "cross-site") or (origin and netloc != (host or "").lower()):
            return self.problem(
                403,
                "a cross-site request may not change anything here (a page of another site "
                "or port sent it); list that origin in [server] cors_origins to allow it",
                title="Forbidden",
            )
        return None


def cookie_allowed(headers: Callable[[str], str | None]) -> bool:
    """Whether a request may be authenticated by the pages' cookie: only when the browser says
    it came from this server's own pages (or sends no ``Sec-Fetch-Site``: not a browser)."""
    site = (headers("sec-fetch-site") or "").lower()
    return site in ("", "same-origin", "none")


def flat_routes(routes: list[object]) -> Iterator[object]:
    """Every route of ``routes``, those of included routers too (FastAPI 0.16x keeps an
    included router as one entry whose routes carry the prefix)."""
    for route in routes:
        nested = getattr(route, "effective_candidates", None)
        if callable(nested):
            yield from flat_routes(list(nested()))
        else:
            yield route


class Methods:
    """``OPTIONS`` -> 204 with the path's methods in ``Allow``; another method the path lacks
    -> 405 problem with the same ``Allow`` (Starlette named only the first route's)."""

    def __init__(self, app: ASGIApp, *, routes: Callable[[], list[object]], problem: Problem):
        self.app = app
        self.routes = routes
        self.problem = problem

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        allowed: set[str] = set()
        for route in flat_routes(self.routes()):
            regex = getattr(route, "path_regex", None)
            if regex is None or not regex.match(path):
                continue
            methods = getattr(route, "methods", None)
            allowed |= set(methods) if methods is not None else {"GET", "HEAD"}  # a mount
        if not allowed or (method in allowed and method != "OPTIONS"):
            await self.app(scope, receive, send)  # unknown paths: the router's 404
            return
        if "GET" in allowed:
            allowed.add("HEAD")
        allowed.add("OPTIONS")
        allow = ", ".join(sorted(allowed))
        if scope["method"] == "OPTIONS":
            response = Response(status_code=204, headers={"Allow": allow})
        else:
            response = self.problem(
                405,
                f"{method} is not a method of {path}; it has {allow}",
                headers={"Allow": allow},
            )
        await response(scope, receive, send)


class CatchAll:
    """An unexpected exception becomes a 500 problem+json (traceback in the log only), and
    uvicorn keeps the connection (see the module)."""

    def __init__(self, app: ASGIApp, *, problem: Problem) -> None:
        self.app = app
        self.problem = problem

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: dict[str, object]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)  # type: ignore[arg-type]
        except Exception as exc:
            log.exception("%s %s", scope.get("method"), scope.get("path"))
            if started:
                raise  # half a response is out: only closing the connection is honest
            response = self.problem(
                500, f"internal error ({type(exc).__name__}); see the server's log"
            )
            await response(scope, receive, send)
