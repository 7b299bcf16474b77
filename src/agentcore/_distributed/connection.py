"""The Redis/Valkey client: ``valkey-glide``, imported lazily, behind a few typed helpers.

GLIDE multiplexes one connection per server: a blocking read holds up every other command on
its client, so callers open one client for blocking reads and another for everything else
(see ``/docs/distributed.md``). Every reply is normalised to ``str``/``int``/lists here.

This is the only module that imports GLIDE, and it silences GLIDE's own logger when it first
does (unless the application configured ``glide.Logger`` before): that logger writes
coloured lines straight to the console, outside the ``logging`` module, and says ``timed
out`` for a port that refused. What matters is said by agentcore instead, through its
exceptions and the ``agentcore.distributed`` logger. Opening a connection first checks with a
plain TCP connect that something listens at the address, so a wrong address fails within
:data:`CONNECT_FOR` seconds with one error naming the address and the real cause
(``Connection refused``). Once the server has accepted a TCP connection it is there, and the
client's handshake is waited for up to :data:`HANDSHAKE_FOR` seconds: a server slow to
answer (a loaded machine) is not reported as absent. Whether a connection was accepted is
asked of the kernel, so a process that ran late past its deadline does not count a
connection the server accepted in time as unanswered.
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from .._core.errors import ConfigError
from . import scripts
from .address import QueueAddress

T = TypeVar("T")

__all__ = [
    "CONNECT_FOR",
    "HANDSHAKE_FOR",
    "Connection",
    "ServerError",
    "is_server_error",
    "open_connection",
    "retrying",
]

_MISSING = (
    "distributed batches need the valkey-glide client: pip install 'trio-agentcore[distributed]'"
)


class ServerError(Exception):
    """A command failed at the server or on the way (connection lost, timeout)."""


CONNECT_FOR = 1.0
"""Seconds a new connection is tried for (a pause of 0.25 s between tries) before the server
counts as unreachable: a server restarting on its port refuses for a moment, a wrong address
refuses for good, an address where nothing answers never accepts."""

HANDSHAKE_FOR = 30.0
"""Seconds the client's handshake is tried for once the server has accepted a TCP
connection: a server that is there but slow to answer is waited for."""


@functools.cache
def _glide() -> Any:
    """The ``glide`` module, its own logger silenced (imported once; a failed import is
    tried again at the next call)."""
    try:
        glide = importlib.import_module("glide")
    except ImportError:
        raise ConfigError(_MISSING) from None
    glide.Logger.init(glide.LogLevel.OFF)  # ``init`` keeps a configuration made before
    return glide


_TRANSIENT = ("loading", "busy", "masterdown", "tryagain", "clusterdown", "connection")


def is_server_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient failure worth a retry after a pause: the connection
    was lost or timed out, or the server is restarting (``LOADING`` its AOF ...). Errors in
    commands or scripts are not: they propagate."""
    if isinstance(exc, BaseExceptionGroup):  # from a nursery of parallel tool calls
        return all(is_server_error(e) for e in exc.exceptions)
    glide = _glide()
    if isinstance(exc, glide.ConnectionError | glide.TimeoutError | glide.ClosingError):
        return True
    if isinstance(exc, glide.RequestError):
        text = str(exc).lower()
        return any(word in text for word in _TRANSIENT)
    return isinstance(exc, ServerError)


async def retrying(
    fn: Callable[[], Awaitable[T]], *, for_seconds: float = 30.0, pause: float = 0.25
) -> T:
    """``await fn()``, again after a pause while it fails transiently (a server restarting),
    for up to ``for_seconds``; then the last error propagates."""
    deadline = trio.current_time() + for_seconds
    while True:
        try:
            return await fn()
        except Exception as exc:
            if not is_server_error(exc) or trio.current_time() >= deadline:
                raise
        await trio.sleep(pause)


def _text(value: Any) -> Any:
    """Bytes to str, recursively (GLIDE answers bulk strings as bytes)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    return value


class Connection:
    """One GLIDE client and the batch's scripts."""

    def __init__(self, client: Any, glide: Any) -> None:
        self._client = client
        self._scripts = {name: glide.Script(getattr(scripts, name)) for name in scripts.__all__}

    async def command(self, *args: str | int | bytes) -> Any:
        """Run one command; the reply with bytes decoded to str."""
        return _text(await self._client.custom_command([_arg(a) for a in args]))

    async def raw(self, *args: str | int | bytes) -> Any:
        """Run one command; the reply as GLIDE gives it (bulk strings as bytes)."""
        return await self._client.custom_command([_arg(a) for a in args])

    async def script(
        self, name: str, keys: Sequence[str], args: Sequence[str | int | bytes]
    ) -> Any:
        """Run one of :mod:`.scripts` by name (``EVALSHA``, loaded again after a restart)."""
        reply = await self._client.invoke_script(
            self._scripts[name], keys=list(keys), args=[_arg(a) for a in args]
        )
        return _text(reply)


def _arg(value: str | int | bytes) -> str | bytes:
    return str(value) if isinstance(value, int) else value


async def _unreachable(host: str, port: int, timeout: float) -> str | None:
    """Why no TCP connection to ``host:port`` is accepted within ``timeout`` seconds
    (``None``: one was, and was closed again). The kernel is asked at the deadline whether
    the connection is established: a process not scheduled until after its deadline (a
    loaded machine) must not take a connection accepted in time for no answer."""
    deadline = trio.current_time() + timeout
    problem = silent = f"no answer within {timeout:g} s"
    found = []
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:  # a name: the resolver answers within the deadline
        with trio.move_on_at(deadline):
            try:
                found = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                return f"unknown host ({exc.strerror})"
    for family, kind, proto, _, where in found:
        with socket.socket(family, kind, proto) as sock:
            sock.setblocking(False)
            error = sock.connect_ex(where)
            if error == errno.EINPROGRESS:
                with trio.move_on_at(deadline):
                    await trio.lowlevel.wait_writable(sock)
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                problem = os.strerror(error)
                continue
            try:
                sock.getpeername()
            except OSError:  # still waiting for the server's answer
                problem = silent
                continue
            return None
    return problem


@asynccontextmanager
async def open_connection(
    address: QueueAddress,
    *,
    name: str = "agentcore",
    timeout_ms: int = 5000,
    connect_for: float = CONNECT_FOR,
) -> AsyncIterator[Connection]:
    """Open a client to ``address``; closed on exit. The server is tried for ``connect_for``
    seconds until it accepts a TCP connection, then its handshake for :data:`HANDSHAKE_FOR`.

    Raises:
        ConfigError: valkey-glide is not installed, or the server cannot be reached (one
            line naming the address and why, e.g. ``Connection refused``).
    """
    glide = _glide()
    config = glide.GlideClientConfiguration(
        [glide.NodeAddress(address.host, address.port)],
        request_timeout=timeout_ms,
        client_name=name,
    )
    # A server restarting (a crash, a failover) refuses connections for a moment: retry.
    # Once it has accepted one, it is there: its handshake gets ``HANDSHAKE_FOR``.
    deadline = trio.current_time() + connect_for
    accepted = False
    while True:
        left = max(0.1, deadline - trio.current_time())
        problem = await _unreachable(address.host, address.port, left)
        if problem is None:
            if not accepted:
                accepted = True
                deadline = max(deadline, trio.current_time() + HANDSHAKE_FOR)
            try:
                client = await glide.GlideClient.create(config)
                break
            except glide.GlideError as exc:
                problem = str(exc)
        if trio.current_time() + 0.25 >= deadline:
            raise ConfigError(
                f"cannot connect to the Redis server at {address.host}:{address.port} "
                f"({address.url}): {problem}"
            )
        await trio.sleep(0.25)
    try:
        yield Connection(client, glide)
    finally:
        await client.close()
