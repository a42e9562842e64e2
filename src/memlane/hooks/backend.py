"""Where a hook's calls go: ``memlane serve`` over HTTP when it answers, else the engine in this
process.

:class:`HttpBackend` is a thin client over :mod:`http.client` (no httpx: its import alone costs
more than a whole hook call); :class:`LocalBackend` imports the engine only when it is built.
Both answer the same three calls with plain values, so the hook does not care which it has.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlsplit


class ServerUnavailable(Exception):
    """No server accepted a connection at the configured URL (use the engine in-process)."""


class BackendError(Exception):
    """The server answered with an error, or the engine failed (the message says which)."""


@dataclass(frozen=True, slots=True)
class Injected:
    """One injection as the hook needs it: the block (``None``: nothing) and its memory ids."""

    block: str | None
    ids: tuple[str, ...]
    turn: int


class Backend(Protocol):
    """What a hook calls."""

    name: str

    def inject(
        self,
        session: str,
        text: str,
        *,
        owner: str,
        agent: str,
        recent: list[str],
        max_chars: int,
    ) -> Injected: ...

    def reset(self, session: str, reason: str, *, owner: str) -> None: ...

    def close(self) -> None: ...


class HttpBackend:
    """Calls to ``memlane serve`` at ``url`` (``http://host:port``), each bounded by the time
    left until ``deadline`` (a :func:`time.monotonic` value).

    Raises (from the constructor): :class:`ServerUnavailable` when nothing accepts a TCP
    connection within ``connect_timeout_s``.
    """

    name = "server"

    def __init__(self, url: str, *, token: str, connect_timeout_s: float, deadline: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise BackendError(f"hooks.url {url!r} is not an http:// URL")
        self.deadline = deadline
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.conn = cls(parts.hostname, port, timeout=min(connect_timeout_s, self._left()))
        try:
            self.conn.connect()
        except (OSError, TimeoutError) as exc:
            self.conn.close()
            raise ServerUnavailable(f"no server at {url} ({type(exc).__name__}: {exc})") from None
        self.url = url

    def _left(self) -> float:
        return max(0.05, self.deadline - time.monotonic())

    def _call(self, method: str, path: str, body: dict[str, Any]) -> Any:
        sock = self.conn.sock
        if sock is not None:
            sock.settimeout(self._left())
        try:
            self.conn.request(method, path, body=json.dumps(body), headers=self.headers)
            resp = self.conn.getresponse()
            raw = resp.read()
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            raise BackendError(f"{method} {self.url}{path}: {type(exc).__name__}: {exc}") from None
        if resp.status != 200:
            detail = raw.decode("utf-8", errors="replace")[:300]
            raise BackendError(f"{method} {self.url}{path}: HTTP {resp.status}: {detail}")
        try:
            return json.loads(raw)
        except ValueError:
            raise BackendError(f"{method} {self.url}{path}: the answer is not JSON") from None

    def inject(
        self,
        session: str,
        text: str,
        *,
        owner: str,
        agent: str,
        recent: list[str],
        max_chars: int,
    ) -> Injected:
        body = {
            "session": session,
            "text": text,
            "owner": owner,
            "agent": agent,
            "recent": recent,
            "max_chars": max_chars,
        }
        data = self._call("POST", "/v1/inject", body)
        ids = tuple(item["memory"]["id"] for item in data.get("items", []))
        return Injected(data.get("block"), ids, int(data.get("turn", 0)))

    def reset(self, session: str, reason: str, *, owner: str) -> None:
        path = f"/v1/sessions/{quote(session, safe='')}/reset"
        self._call("POST", path, {"reason": reason, "owner": owner})

    def close(self) -> None:
        self.conn.close()


class LocalBackend:
    """The engine of ``home`` in this process (the model loads on the first injection).

    Raises (from the constructor): whatever :meth:`memlane.MemoryEngine.open` raises.
    """

    name = "in-process"

    def __init__(self, home: str) -> None:
        from memlane.engine import MemoryEngine

        self.engine = MemoryEngine.open(home)

    def inject(
        self,
        session: str,
        text: str,
        *,
        owner: str,
        agent: str,
        recent: list[str],
        max_chars: int,
    ) -> Injected:
        result = self.engine.inject(
            session, text, owner=owner, agent=agent, recent=recent, max_chars=max_chars
        )
        return Injected(result.block, tuple(i.memory.id for i in result.items), result.turn)

    def reset(self, session: str, reason: str, *, owner: str) -> None:
        self.engine.reset_session(session, reason, owner=owner)

    def close(self) -> None:
        self.engine.close()
