"""A distributed batch whose Redis server is not there: one line naming the address, soon.

No server is needed: a free port refuses connections, and a listening socket whose accept
queue is full answers nothing (the kernel drops the connection attempts). The time limits
are generous for a loaded two-core machine (the connection is tried for ``CONNECT_FOR`` =
1 s) but far below the 10 s and more it took before. They time the connection, not the first
import of the client library (0.3 to 0.7 s alone, more on a machine running the suite's
workers): each test imports it before its clock starts.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from agentcore import ConfigError
from agentcore._cli.main import main
from agentcore._distributed.address import QueueAddress
from agentcore._distributed.connection import _glide, _unreachable, open_connection
from tests.extras import skip_without

skip_without("glide", reason="needs valkey-glide")  # the client; no server is needed


def _refusing_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _refusal(port: int) -> tuple[str, float]:
    """The error opening a connection to ``port`` raised, and the seconds it took."""
    address = QueueAddress.parse(f"redis://127.0.0.1:{port}/b1")
    _glide()
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        async with open_connection(address):
            pass
    return str(caught.value), time.monotonic() - started


async def test_a_refused_port_fails_within_two_seconds_naming_the_address() -> None:
    port = _refusing_port()
    error, seconds = await _refusal(port)
    assert seconds < 2.0
    assert error == (
        f"cannot connect to the Redis server at 127.0.0.1:{port} "
        f"(redis://127.0.0.1:{port}/b1): Connection refused"
    )


async def test_a_port_where_nothing_answers_fails_within_two_seconds_naming_the_address() -> None:
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # one connection waits to be accepted; the next gets no answer
        port = int(listener.getsockname()[1])
        queued.connect(("127.0.0.1", port))
        error, seconds = await _refusal(port)
    assert seconds < 2.0
    assert error.startswith(
        f"cannot connect to the Redis server at 127.0.0.1:{port} "
        f"(redis://127.0.0.1:{port}/b1): no answer within "
    )


async def test_an_accepted_connection_counts_though_the_process_looked_after_its_deadline() -> None:
    # A deadline of 0 is one this process passes before it looks (what a loaded machine does
    # to a process that is not scheduled): the kernel has accepted the connection meanwhile.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = int(listener.getsockname()[1])
        assert await _unreachable("127.0.0.1", port, 0.0) is None
    assert await _unreachable("127.0.0.1", port, 0.0) == "Connection refused"


def test_agentcore_worker_on_a_refused_port_prints_one_line_and_exits_2(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    task = tmp_path / "task.toml"
    task.write_text('prompt = "Say {word}."\n')
    port = _refusing_port()
    _glide()
    started = time.monotonic()
    code = main(["worker", str(task), "--queue", f"redis://127.0.0.1:{port}/b1"])
    elapsed = time.monotonic() - started
    out, err = capfd.readouterr()  # file descriptors: GLIDE's own logger writes to them
    assert code == 2
    assert elapsed < 2.0
    assert out == ""
    assert err.splitlines() == [
        f"agentcore: error: cannot connect to the Redis server at 127.0.0.1:{port} "
        f"(redis://127.0.0.1:{port}/b1): Connection refused"
    ]
