"""Where a hook's calls go: ``memlane serve`` over HTTP when it answers, else the engine in this
process.

:class:`HttpBackend` is a minimal HTTP/1.1 client on a socket (httpx, or even :mod:`http.client`,
costs more to import than a whole call to a warm server); :class:`LocalBackend` imports the
engine only when it is built.
Both answer the same calls with plain values, so the hook does not care which it has.
"""

from __future__ import annotations

import time

from memlane import _fastjson as json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any, Protocol

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
            known: list[str],
            project: str | None = None,
        ) -> Injected: ...

        def inject_pinned(
            self,
            session: str,
            *,
            owner: str,
            agent: str,
            max_chars: int,
            project: str | None = None,
        ) -> Injected: ...

        def reset(self, session: str, reason: str, *, owner: str) -> None: ...

        def sync(self, session: str, text: str, *, owner: str, agent: str) -> Injected: ...

        def turn(self, session: str, message: str, **fields: Any) -> dict[str, Any]: ...

        def close(self) -> None: ...


class ServerUnavailable(Exception):
    """No server accepted a connection at the configured URL (use the engine in-process)."""


class BackendError(Exception):
    """The server answered with an error, or the engine failed (the message says which)."""


class Unauthorized(BackendError):
    """The server answered HTTP 401: it does not take the token sent (a token added, changed
    or removed in ``memlane.toml`` since the hook read it)."""


class NotOurServer(BackendError):
    """What answers at the recorded URL did not prove that it serves this home's store
    (:meth:`HttpBackend.prove`): nothing else is sent to it."""


class Injected:
    """One injection as the hook needs it: the block (``None``: nothing), its memory ids and
    the session's turn (a plain class: :mod:`dataclasses` costs an import of :mod:`inspect`)."""

    __slots__ = ("block", "ids", "turn")

    def __init__(self, block: str | None, ids: tuple[str, ...], turn: int) -> None:
        self.block = block
        self.ids = ids
        self.turn = turn


#: Characters of a host name in the plain URL shape (a bracketed IPv6 address: hex digits,
#: ``:`` and ``.`` between the brackets).
_HOST_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-"
_IPV6_CHARS = "0123456789ABCDEFabcdef:."
#: Characters a path segment keeps as they are (those :func:`urllib.parse.quote` keeps with
#: ``safe=""``).
_SEGMENT_CHARS = _HOST_CHARS + "_~"


def _plain_url(url: str) -> tuple[str, str, str | None, str] | None:
    """``(scheme, host, port, path)`` of a URL of the plain shape the records hold and most
    ``[hooks] url`` values have: ``http(s)://`` , a host (a name, or an IPv6 address in
    brackets), an optional ``:port`` of 1-5 digits, an optional path without ``?``, ``#`` or
    ``@``; else ``None``. (String methods, not a pattern: :mod:`re` and the :mod:`enum`,
    :mod:`functools` and :mod:`collections` it imports cost milliseconds of every call.)"""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in {"http", "https"}:
        return None
    cut = rest.find("/")
    netloc, path = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
    if "?" in path or "#" in path or "@" in path:
        return None
    if netloc.startswith("["):
        end = netloc.find("]")
        host, tail = netloc[: end + 1], netloc[end + 1 :]
        if end < 2 or host[1:-1].strip(_IPV6_CHARS):
            return None
    else:
        host, colon, port_text = netloc.partition(":")
        tail = colon + port_text
        if not host or host.strip(_HOST_CHARS):
            return None
    port = None
    if tail:
        port = tail[1:]
        if not tail.startswith(":") or not 1 <= len(port) <= 5:
            return None
        if not (port.isascii() and port.isdigit()):
            return None
    return scheme, host, port, path


def split_url(url: str) -> tuple[str, str | None, int | None, str, str]:
    """``(scheme, host, port, netloc, path)`` of ``url`` as :func:`urllib.parse.urlsplit`
    gives them (the host lower-cased and unbracketed; port ``None`` when not given). URLs
    beyond the plain shape (:func:`_plain_url`) go through :func:`urllib.parse.urlsplit` (its
    import, ~3 ms with :mod:`ipaddress`, is then paid).

    Raises:
        ValueError: a port out of range (from :func:`urllib.parse.urlsplit`).
    """
    plain = _plain_url(url)
    if plain is not None:
        scheme, host, port, path = plain
        number = int(port) if port else None
        if number is not None and number > 65535:
            raise ValueError("Port out of range 0-65535")
        netloc = url[len(scheme) + 3 : len(url) - len(path)]
        return scheme, host.strip("[]").lower(), number, netloc, path
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port, parts.netloc, parts.path


def quote_segment(text: str) -> str:
    """``text`` percent-encoded as one URL path segment (:func:`urllib.parse.quote` with
    ``safe=""``; imported only for text beyond letters, digits and ``_.~-``)."""
    if text and not text.strip(_SEGMENT_CHARS):
        return text
    from urllib.parse import quote

    return quote(text, safe="")


def connect(host: str | bytes, port: int, timeout: float) -> Any:
    """A TCP connection to ``(host, port)`` as :func:`socket.create_connection` makes it (each
    address :func:`getaddrinfo` gives, in order, until one connects), on the C module
    :mod:`_socket`: :mod:`socket` imports :mod:`enum`, :mod:`selectors` and more, milliseconds
    of every hook call. The socket answers ``settimeout``, ``sendall``, ``recv`` and ``close``.

    Raises:
        OSError: no address accepted the connection (the last address's error).
    """
    import _socket

    failure: OSError | None = None
    for family, kind, proto, _, address in _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        return sock
    raise failure or OSError(f"getaddrinfo returned no address for {host!r}")


class HttpBackend:
    """Calls to ``memlane serve`` at ``url`` (``http://host:port``), each bounded by the time
    left until ``deadline`` (a :func:`time.monotonic` value).

    A minimal HTTP/1.1 client on one keep-alive socket: the standard library's
    :mod:`http.client` imports the ``email`` package and :mod:`ssl`, about 100 ms on a busy
    machine, more than the whole call to a warm server.

    Raises (from the constructor): :class:`ServerUnavailable` when nothing accepts a TCP
    connection within ``connect_timeout_s``.
    """

    name = "server"

    def __init__(self, url: str, *, token: str, connect_timeout_s: float, deadline: float) -> None:
        try:
            scheme, hostname, port, netloc, path = split_url(url)
        except ValueError as exc:
            raise BackendError(f"hooks.url {url!r}: {exc}") from None
        if scheme not in {"http", "https"} or not hostname:
            raise BackendError(f"hooks.url {url!r} is not an http:// URL")
        self.deadline = deadline
        self.url = url.rstrip("/")
        self.prefix = path.rstrip("/")
        port = port or (443 if scheme == "https" else 80)
        self.host_header = netloc
        self.token = token
        # an ASCII host as bytes: a str goes through the "idna" codec, an import of
        # encodings.idna, stringprep and unicodedata (~2 ms) on every hook call
        host: str | bytes = hostname.encode("ascii") if hostname.isascii() else hostname
        timeout = min(connect_timeout_s, self._left())
        try:
            if scheme == "https":  # ssl wraps a socket.socket (and imports socket anyway)
                import socket
                import ssl

                plain = socket.create_connection((host, port), timeout=timeout)  # type: ignore[arg-type]
                sock: Any = ssl.create_default_context().wrap_socket(
                    plain, server_hostname=hostname
                )
            else:
                sock = connect(host, port, timeout)
        except OSError as exc:
            raise ServerUnavailable(f"no server at {url} ({type(exc).__name__}: {exc})") from None
        self.sock = sock
        self.buffer = b""

    def _left(self) -> float:
        return max(0.05, self.deadline - time.monotonic())

    def prove(self, key: bytes, store_id: str) -> None:
        """Check that the server serves the store ``store_id`` of the home whose proof key is
        ``key`` (:func:`memlane.hooks.daemon.proof_of`) before anything else is sent: ``GET
        /v1/proof`` with a fresh nonce, and neither the token nor any text.

        Raises:
            NotOurServer: the answer is not the proof (another process on the port, a server
                of another home), or no answer came.
        """
        import os

        from memlane.hooks.daemon import proof_of, same_proof

        nonce = os.urandom(16).hex()  # :mod:`secrets` costs milliseconds of import
        try:
            data = self._call("GET", f"/v1/proof?nonce={nonce}", None, auth=False)
        except BackendError as exc:
            raise NotOurServer(f"no proof from {self.url} ({exc})") from None
        proof = data.get("proof") if isinstance(data, dict) else None
        if not isinstance(proof, str) or not same_proof(proof, proof_of(key, nonce, store_id)):
            raise NotOurServer(
                f"{self.url} answered a wrong proof for this home's store (another process, "
                "or a server of another store)"
            )

    def _call(
        self, method: str, path: str, body: dict[str, Any] | None, *, auth: bool = True
    ) -> Any:
        where = f"{method} {self.url}{path.split('?', 1)[0]}"
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        head = [
            f"{method} {self.prefix}{path} HTTP/1.1",
            f"Host: {self.host_header}",
            "Accept: application/json",
        ]
        if body is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
        if self.token and auth:
            head.append(f"Authorization: Bearer {self.token}")
        try:
            self.sock.settimeout(self._left())
            self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
            status, raw = self._response()
        except (OSError, ValueError) as exc:
            raise BackendError(f"{where}: {type(exc).__name__}: {exc}") from None
        if status != 200:
            detail = raw.decode("utf-8", errors="replace")[:300]
            kind = Unauthorized if status == 401 else BackendError
            raise kind(f"{where}: HTTP {status}: {detail}")
        try:
            return json.loads(raw)
        except ValueError:
            raise BackendError(f"{where}: the answer is not JSON") from None

    def _read(self, n: int) -> bytes:
        """At least ``n`` more bytes in the buffer (raises ``ValueError`` on a closed socket)."""
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ValueError("the server closed the connection")
            self.buffer += chunk
        return self.buffer

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._read(len(self.buffer) + 1)
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def _take(self, n: int) -> bytes:
        self._read(n)
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _response(self) -> tuple[int, bytes]:
        """``(status, body)`` of one response (Content-Length or chunked)."""
        status_line = self._line().decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = b""
            while size := int(self._line().split(b";")[0], 16):
                body += self._take(size)
                self._line()
            while self._line():  # trailers
                pass
            return int(parts[1]), body
        return int(parts[1]), self._take(int(headers.get("content-length", "0")))

    def inject(
        self,
        session: str,
        text: str,
        *,
        owner: str,
        agent: str,
        recent: list[str],
        max_chars: int,
        known: list[str],
        project: str | None = None,
    ) -> Injected:
        body = {
            "session": session,
            "text": text,
            "owner": owner,
            "agent": agent,
            "recent": recent,
            "max_chars": max_chars,
            "known": known,
            "project": project,
        }
        data = self._call("POST", "/v1/inject", body)
        ids = tuple(item["memory"]["id"] for item in data.get("items", []))
        return Injected(data.get("block"), ids, int(data.get("turn", 0)))

    def inject_pinned(
        self, session: str, *, owner: str, agent: str, max_chars: int, project: str | None = None
    ) -> Injected:
        body = {
            "session": session,
            "owner": owner,
            "agent": agent,
            "max_chars": max_chars,
            "pinned_only": True,
            "project": project,
        }
        data = self._call("POST", "/v1/inject", body)
        ids = tuple(item["memory"]["id"] for item in data.get("items", []))
        return Injected(data.get("block"), ids, int(data.get("turn", 0)))

    def reset(self, session: str, reason: str, *, owner: str) -> None:
        path = f"/v1/sessions/{quote_segment(session)}/reset"
        self._call("POST", path, {"reason": reason, "owner": owner})

    def sync(self, session: str, text: str, *, owner: str, agent: str) -> Injected:
        """Compare the session's tracking with ``text`` (the memlane blocks of one request to
        the model); returns the block of the memories the request lacks (compressed away;
        ``None`` when none) and their ids."""
        path = f"/v1/sessions/{quote_segment(session)}/sync"
        data = self._call("POST", path, {"text": text, "owner": owner, "agent": agent})
        gone = tuple(str(mid) for mid in data.get("gone", []))
        return Injected(data.get("block"), gone, int(data.get("state", {}).get("turn", 0)))

    def turn(self, session: str, message: str, **fields: Any) -> dict[str, Any]:
        """One model call's memory under the turn model (``POST /v1/turn``): ``fields`` are
        :meth:`memlane.MemoryEngine.turn`'s keyword arguments (``kept`` required); the answer is
        ``Turn.to_dict()`` (``block``, ``repeat``, ``earlier``, ...), as the in-process
        backend's."""
        return dict(
            self._call("POST", "/v1/turn", {"session": session, "message": message, **fields})
        )

    def close(self) -> None:
        self.sock.close()


class LocalBackend:
    """The engine of ``home`` in this process (the model loads on the first injection).

    Raises (from the constructor): whatever :meth:`memlane.MemoryEngine.open` raises.
    """

    name = "in-process"

    def __init__(self, home: str, log_path: str | None = None) -> None:
        import logging

        from memlane.engine import MemoryEngine

        if log_path is not None:  # the engine's warnings go to hooks.log, never to the client
            handler = logging.FileHandler(log_path, encoding="utf-8", delay=True)
            handler.setLevel(logging.WARNING)
            handler.setFormatter(
                logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
            )
            logging.getLogger("memlane").addHandler(handler)
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
        known: list[str],
        project: str | None = None,
    ) -> Injected:
        result = self.engine.inject(
            session,
            text,
            owner=owner,
            agent=agent,
            recent=recent,
            max_chars=max_chars,
            known=known,
            project=project,
        )
        return Injected(result.block, tuple(i.memory.id for i in result.items), result.turn)

    def inject_pinned(
        self, session: str, *, owner: str, agent: str, max_chars: int, project: str | None = None
    ) -> Injected:
        result = self.engine.inject_pinned(
            session, owner=owner, agent=agent, max_chars=max_chars, project=project
        )
        return Injected(result.block, tuple(i.memory.id for i in result.items), result.turn)

    def reset(self, session: str, reason: str, *, owner: str) -> None:
        self.engine.reset_session(session, reason, owner=owner)

    def sync(self, session: str, text: str, *, owner: str, agent: str) -> Injected:
        done = self.engine.sync_session(session, text, owner=owner, agent=agent)
        return Injected(done.block, done.gone, done.state.turn)

    def turn(self, session: str, message: str, **fields: Any) -> dict[str, Any]:
        """:meth:`memlane.MemoryEngine.turn` here, answered as ``Turn.to_dict()`` (the HTTP
        backend's answer)."""
        return self.engine.turn(session, message, **fields).to_dict()

    def close(self) -> None:
        self.engine.close()
