"""The upstream call: the client's request (headers unchanged but for the hop-by-hop ones and
memlane's own) to the upstream with httpx, its answer streamed back to the client as the
upstream sends it (:meth:`httpx.Response.aiter_raw`: the bytes unchanged, compressed or not, SSE
events one by one). A client that disconnects closes the upstream response, which cancels the
upstream request. An answer that is not an event stream and says its length (up to
:data:`WHOLE` bytes: a non-streaming model answer, sent whole by the upstream) is read whole and
answered in one piece, the same bytes: less work per request than a stream."""

from __future__ import annotations

import gzip
import logging
import re
import zlib
from collections.abc import AsyncIterator, Callable, Mapping

import httpx
from starlette.background import BackgroundTask
from starlette.responses import Response, StreamingResponse

log = logging.getLogger("memlane.proxy")

#: Headers that belong to one connection (RFC 9110 7.6.1), never forwarded either way.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

#: The largest answer (its Content-Length, in bytes) read whole before it is passed on.
WHOLE = 1_000_000

#: A Responses API answer's id, in its JSON or its first SSE event.
RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]+)"')


def upstream_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's headers for the upstream: all but the hop-by-hop ones, ``host`` and
    ``content-length`` (httpx sets both) and memlane's own ``x-memlane-*``."""
    return {
        k: v
        for k, v in headers.items()
        if k not in HOP_BY_HOP and k not in ("host", "content-length")
        and not k.startswith("x-memlane-")
    }  # fmt: skip


class IdWatch:
    """Finds a Responses answer's id in the bytes streamed to the client (the first 64 KiB; a
    gzip or deflate body is decompressed at the end), for ``found(id)``."""

    LIMIT = 65_536

    def __init__(self, encoding: str, found: Callable[[str], None]) -> None:
        self.encoding = encoding.lower()
        self.found = found
        self.buffer = bytearray()
        self.done = False

    def feed(self, chunk: bytes) -> None:
        if self.done or len(self.buffer) >= self.LIMIT:
            return
        self.buffer += chunk[: self.LIMIT - len(self.buffer)]
        if self.encoding in ("", "identity"):
            self._look(bytes(self.buffer))

    def end(self) -> None:
        if self.done or self.encoding in ("", "identity"):
            return
        try:
            if self.encoding == "gzip":
                data = gzip.decompress(bytes(self.buffer))
            elif self.encoding == "deflate":
                data = zlib.decompress(bytes(self.buffer))
            else:
                return
        except (OSError, EOFError, zlib.error):
            return
        self._look(data)

    def _look(self, data: bytes) -> None:
        match = RESPONSE_ID.search(data)
        if match:
            self.done = True
            self.found(match.group(1).decode("ascii"))


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    watch_id: Callable[[str], None] | None = None,
) -> Response:
    """Send the request upstream and answer the client with its response, streamed.

    Raises:
        httpx.TransportError: the upstream could not be reached, timed out before answering or
            broke off an answer read whole (the caller answers 502 / 504).
    """
    request = client.build_request(method, url, headers=upstream_headers(headers), content=body)
    upstream = await client.send(request, stream=True)
    out_headers = [(k, v) for k, v in upstream.headers.multi_items() if k.lower() not in HOP_BY_HOP]
    watch = (
        IdWatch(upstream.headers.get("content-encoding", ""), watch_id)
        if watch_id is not None and upstream.status_code < 400
        else None
    )
    raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in out_headers]
    length = upstream.headers.get("content-length", "")
    if (
        length.isdigit()
        and int(length) <= WHOLE
        and "text/event-stream" not in upstream.headers.get("content-type", "")
    ):
        try:
            content = b"".join([chunk async for chunk in upstream.aiter_raw()])
        finally:
            await upstream.aclose()
        if watch is not None:
            watch.feed(content)
            watch.end()
        whole = Response(content, status_code=upstream.status_code)
        whole.raw_headers = raw_headers
        return whole

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                if watch is not None:
                    watch.feed(chunk)
                yield chunk
            if watch is not None:
                watch.end()
        except httpx.TransportError as exc:  # the upstream broke off mid-answer
            log.warning("proxy: the upstream broke off its answer (%s)", type(exc).__name__)
        finally:
            await upstream.aclose()

    response = StreamingResponse(
        relay(), status_code=upstream.status_code, background=BackgroundTask(upstream.aclose)
    )
    response.raw_headers = raw_headers
    return response
