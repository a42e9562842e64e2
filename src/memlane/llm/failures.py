"""What went wrong on a call to a model server, said as what it is: one line with the server's own
words and the fix.

The SDKs' exceptions (``openai`` and ``anthropic`` share their shapes) are read by attribute and
name, so this module imports neither SDK: an HTTP error has ``status_code`` and ``body``; a
timeout's class name holds ``Timeout``; a connection error's cause chain tells a refused
connection (nothing listens) from a server that closed it without an answer (it died).
"""

from __future__ import annotations

from memlane.llm.formats import server_message

#: The fix to try for an HTTP status from a model server.
_FIXES = {
    400: "the server refused the request: check llm.model and what the server supports",
    401: "check the API key in the environment variable named by llm.api_key_env",
    403: "check the API key's permissions (llm.api_key_env) and llm.model",
    404: "check llm.base_url (OpenAI-compatible servers end in /v1) and llm.model",
    408: "the server timed out: raise llm.timeout_s or use a smaller model",
    413: "the request is too long for the server: use a model with a larger context",
    422: "the server refused the request: check llm.model and what the server supports",
    429: "rate limited after llm.max_retries retries: raise llm.max_retries or send less",
}

#: Words of a transport error meaning the server closed the connection without an answer.
_CLOSED = ("RemoteProtocolError", "ReadError", "ConnectionResetError", "BrokenPipeError")
_REFUSED = ("ConnectError", "ConnectionRefusedError")


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def describe(exc: BaseException, endpoint: str, timeout_s: float) -> str:
    """One line that says what ``exc`` (raised by an SDK call to ``endpoint``) was and how to fix
    it: ``the server at URL answered HTTP 500: <its message> (<fix>)``, ``the server at URL
    closed the connection without an answer (...)``, ``nothing answers at URL (...)``, ``the
    server at URL did not answer within N s (...)``, else the exception's type and text."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        fix = _FIXES.get(status, "the server failed: see its log" if status >= 500 else "")
        tail = f" ({fix})" if fix else ""
        return f"the server at {endpoint} answered HTTP {status}: {server_message(exc)}{tail}"
    names = [type(e).__name__ for e in _causes(exc)]
    if any("Timeout" in n for n in names):
        return (
            f"the server at {endpoint} did not answer within {timeout_s:g} s "
            "(raise llm.timeout_s, or use a smaller model)"
        )
    if any(n in _CLOSED for n in names):
        return (
            f"the server at {endpoint} closed the connection without an answer "
            "(did it crash? see its log)"
        )
    if any(n in _REFUSED for n in names):
        return (
            f"nothing answers at {endpoint}: start the server, or fix llm.base_url "
            f"({server_message(_causes(exc)[-1])})"
        )
    return f"{type(exc).__name__}: {server_message(exc)}"
