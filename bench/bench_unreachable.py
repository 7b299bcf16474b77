"""How long a distributed command takes to give up on a Redis server that is not there.

    .venv/bin/python bench/bench_unreachable.py --runs 5

Three numbers, each the median of ``--runs`` (a free port refuses connections; no server is
needed):

- ``open_connection``: opening the client in a running process (what a worker, a submitter
  or a test pays), measured in this process;
- ``agentcore worker``: the whole command, from exec to its exit with status 2 and one line,
  in a subprocess;
- ``agentcore --help``: the same interpreter start and imports with nothing to connect to,
  the floor under the previous line on this machine.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from agentcore import ConfigError
from agentcore._distributed.address import QueueAddress
from agentcore._distributed.connection import open_connection

AGENTCORE = Path(sys.executable).with_name("agentcore")


def _refusing_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _connect_once() -> float:
    address = QueueAddress.parse(f"redis://127.0.0.1:{_refusing_port()}/b")
    started = time.monotonic()
    try:
        async with open_connection(address):
            raise SystemExit("something listens on a free port")
    except ConfigError:
        pass
    return time.monotonic() - started


def _command(args: list[str], expect: int) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if proc.returncode != expect:
        raise SystemExit(f"{args}: exit {proc.returncode}: {proc.stderr}")
    return elapsed, proc.stdout + proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    connect = [trio.run(_connect_once) for _ in range(runs)]
    with tempfile.TemporaryDirectory() as folder:
        task = Path(folder) / "task.toml"
        task.write_text('prompt = "Say {word}."\n')
        worker, output = [], ""
        for _ in range(runs):
            url = f"redis://127.0.0.1:{_refusing_port()}/b"
            elapsed, output = _command([str(AGENTCORE), "worker", str(task), "--queue", url], 2)
            worker.append(elapsed)
    floor = [_command([str(AGENTCORE), "--help"], 0)[0] for _ in range(runs)]
    print(f"open_connection     {statistics.median(connect):.2f} s")
    print(f"agentcore worker    {statistics.median(worker):.2f} s, output: {output.strip()!r}")
    print(f"agentcore --help    {statistics.median(floor):.2f} s")


if __name__ == "__main__":
    main()
