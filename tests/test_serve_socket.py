"""The socket ``memlane serve`` binds itself: connections accepted on it get TCP_NODELAY.

Without it a keep-alive client (an SDK, the hooks' daemon client, ``bench serve``) waited ~40 ms
for every response: the body stayed behind the headers until the client's delayed ACK (Nagle's
algorithm). asyncio turns Nagle off only on sockets whose protocol says TCP, so the property is
checked on a connection asyncio accepted on :func:`memlane.server.lifecycle.bind`'s socket.
"""

from __future__ import annotations

import asyncio
import socket

from memlane.server.lifecycle import bind


def test_connections_accepted_on_the_served_socket_have_nagle_off() -> None:
    listener = bind("127.0.0.1", 0)
    port = listener.getsockname()[1]
    seen: list[int] = []

    async def main() -> None:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(200):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(main())
    assert seen and seen[0] != 0
