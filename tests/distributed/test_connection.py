"""Opening a connection to a real server that is there but slow to answer: a worker's start
waits for its handshake instead of reporting the server as absent (a server that is not
there still fails within about a second: tests/batch/test_queue_unreachable.py)."""

from __future__ import annotations

import os
import signal

import trio

from agentcore import QueueAddress
from agentcore._distributed.connection import CONNECT_FOR, HANDSHAKE_FOR, open_connection


async def test_a_server_that_accepts_but_answers_late_is_waited_for(own_redis_server):
    address = QueueAddress.parse(own_redis_server.url("slow"))
    pid = own_redis_server.pid
    os.kill(pid, signal.SIGSTOP)  # the kernel still accepts its connections; it answers none
    try:
        async with trio.open_nursery() as nursery:

            async def wake() -> None:
                await trio.sleep(3 * CONNECT_FOR)  # longer than GLIDE's own 2 s as well
                os.kill(pid, signal.SIGCONT)

            nursery.start_soon(wake)
            started = trio.current_time()
            with trio.fail_after(HANDSHAKE_FOR):
                async with open_connection(address) as conn:
                    assert await conn.command("PING") == "PONG"
            assert trio.current_time() - started >= 3 * CONNECT_FOR
    finally:
        os.kill(pid, signal.SIGCONT)
