"""Who is calling: bearer tokens (constant-time comparison) and owner-bound tokens.

Without any token configured every caller may name any owner (the server listens on loopback
only then). A token bound to one owner sees only that owner: naming another is a 404, exactly
as a memory that does not exist.
"""

from __future__ import annotations

import hmac
from urllib.parse import quote, unquote

from fastapi import Request

from memlane.errors import NotFound
from memlane.server.guard import cookie_allowed
from memlane.server.state import Principal, ServerState

#: Cookie the web pages send the token in: set by the server's ``POST /login`` (``HttpOnly;
#: SameSite=Strict``: no script reads it, no other site sends it), percent-encoded.
COOKIE = "memlane_token"


def cookie_value(token: str) -> str:
    """The cookie's value for ``token`` (any character survives: ``+/=`` included)."""
    return quote(token, safe="")


class AuthError(Exception):
    """No or a wrong bearer token (401)."""


def principal_of(state: ServerState, request: Request) -> Principal:
    """The caller of ``request``. Raises :class:`AuthError`."""
    server = state.server
    if not server.token and not server.owner_tokens:
        return Principal()
    header = request.headers.get("authorization", "")
    given = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if not given and cookie_allowed(request.headers.get):  # only from this server's own pages
        given = unquote(request.cookies.get(COOKIE, ""))
    if not given:
        raise AuthError("this server needs Authorization: Bearer <token>")
    secret = given.encode()
    found: Principal | None = None
    if server.token and hmac.compare_digest(secret, server.token.encode()):
        found = Principal()
    for owner, token in sorted(server.owner_tokens.items()):  # every one compared
        if hmac.compare_digest(secret, token.encode()) and found is None:
            found = Principal(owner)
    if found is None:
        raise AuthError("the bearer token is not valid for this server")
    return found


def check_token(state: ServerState, token: str) -> bool:
    """Whether ``token`` is one of this server's (the login form's check)."""
    server = state.server
    secret = token.strip().encode()
    candidates = [server.token, *server.owner_tokens.values()]
    found = False
    for known in candidates:  # every one compared, in constant time
        found = bool(known and hmac.compare_digest(secret, known.encode())) or found
    return found


async def caller(request: Request) -> Principal:
    """FastAPI dependency: the caller of this request. ``async``: it only reads headers, and a
    plain ``def`` dependency is run in the thread pool, one more hand-off between threads per
    request (py-spy under ``bench serve``'s 8 clients: ~9 % of a worker's GIL time went to it)."""
    state: ServerState = request.app.state.memlane
    return principal_of(state, request)


def scope(principal: Principal, owner: str | None) -> str | None:
    """The owner a call acts for: the token's owner, else ``owner``; ``None`` when neither
    names one: the engine then applies the owner rule (``[scope] owner``, else ``"default"``:
    :meth:`memlane.engine.MemoryEngine.owner_of`), as every door does. Raises
    :class:`NotFound` when an owner-bound token names another owner."""
    if principal.owner is None:
        return owner
    if owner is not None and owner != principal.owner:
        raise NotFound(f"no owner {owner!r} for this token")
    return principal.owner


def require_admin(principal: Principal) -> None:
    """Settings are the server's, not an owner's: an owner-bound token does not see them."""
    if principal.owner is not None:
        raise NotFound("no settings for this token (they need the server's token)")
