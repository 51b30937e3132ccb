"""The listening socket ``plangate serve`` binds: what the connections it accepts are."""

from __future__ import annotations

import asyncio
import socket

from plangate.web.server import bind


async def test_accepted_connections_send_without_waiting_for_an_ack() -> None:
    # With Nagle's algorithm on, the second write of a response on a kept-alive connection
    # waits for the client's delayed ACK (~40 ms per request). asyncio switches it off
    # only on sockets created with IPPROTO_TCP.
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock: socket.socket = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    listener = bind("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    try:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted, 5) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
