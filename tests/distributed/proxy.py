"""A TCP proxy on 127.0.0.1 for the chaos runs: delays traffic and cuts every connection.

Workers connect to the proxy instead of the server. ``cut()`` closes every proxied
connection at once (what a network partition or a middlebox reset does to the clients);
``delay`` adds latency to every chunk forwarded in either direction while it is set.
"""

from __future__ import annotations

import trio


class ChaosProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.delay = 0.0
        self.port = 0
        self.cuts = 0
        self._pairs: set[trio.CancelScope] = set()

    async def serve(self, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._handle, listeners)

    def cut(self) -> None:
        """Close every connection now; new ones are accepted as usual."""
        self.cuts += 1
        for scope in list(self._pairs):
            scope.cancel()

    async def _handle(self, client: trio.SocketStream) -> None:
        try:
            server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        except OSError:
            await client.aclose()
            return
        with trio.CancelScope() as scope:
            self._pairs.add(scope)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, client, server, nursery.cancel_scope)
                    nursery.start_soon(self._pump, server, client, nursery.cancel_scope)
            finally:
                self._pairs.discard(scope)
        for stream in (client, server):
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                await stream.aclose()

    async def _pump(
        self, source: trio.SocketStream, sink: trio.SocketStream, pair: trio.CancelScope
    ) -> None:
        try:
            while data := await source.receive_some(65536):
                if self.delay:
                    await trio.sleep(self.delay)
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        pair.cancel()  # one side closed: close the other
