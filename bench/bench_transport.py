"""Client CPU per request: the lean h11 transport against httpx, side by side.

A trio + h11 keep-alive server runs in a separate process on 127.0.0.1 and answers every
request with the same ~400-byte chat completion. The client process runs N concurrent tasks
(one per inference slot), each sending requests in a loop, and measures its own CPU time
(``time.process_time``) and the wall time. The clients compared:

- ``h11-floor``: a bare h11-over-trio loop with no time limits, error mapping, retry or header
  checks (a reference for what h11 and trio cost by themselves, not a transport);
- ``lean``: :class:`agentcore._transports.lean.LeanTransport`, one connection per slot;
- ``httpx-shared``: one ``httpx.AsyncClient`` with a pool of N connections;
- ``httpx-per-slot``: one ``httpx.AsyncClient`` (one connection) per slot.

Each cell is the median of several runs; every run is bounded by a request count and a time
limit. The server's own CPU per request is read from /proc (Linux) and reported too, since it
shares the machine with the client.

Run: ``.venv/bin/python bench/bench_transport.py`` (``--help`` for the knobs).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import cast

import h11
import trio

from agentcore import Timeouts
from agentcore._transports.factory import make_transport
from agentcore._transports.hosted import HttpxTransport
from agentcore.wire import HttpRequest, HttpResponse, Transport

# ---- the server (separate process) ----

COMPLETION = (
    b'{"id":"chatcmpl-bench0001","object":"chat.completion","created":1700000000,'
    b'"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant",'
    b'"content":"The answer is forty-two. It follows from the figures in the report."},'
    b'"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":812,'
    b'"completion_tokens":17,"total_tokens":829,"prompt_tokens_details":{"cached_tokens":768}},'
    b'"system_fingerprint":"fp_bench"}'
)


async def _serve_connection(stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    head = h11.Response(
        status_code=200,
        headers=[
            ("content-type", "application/json"),
            ("content-length", str(len(COMPLETION))),
        ],
    )
    body = h11.Data(data=COMPLETION)
    end = h11.EndOfMessage()
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif type(event) is h11.EndOfMessage:
                out = conn.send(head) + conn.send(body) + conn.send(end)  # type: ignore[operator]
                await stream.send_all(out)
                conn.start_next_cycle()
            elif type(event) is h11.ConnectionClosed:
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


async def _serve_main() -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, _serve_connection, 0, host="127.0.0.1")
        )
        print(listeners[0].socket.getsockname()[1], flush=True)
        # Serve until the parent closes our stdin.
        await trio.to_thread.run_sync(sys.stdin.read)
        nursery.cancel_scope.cancel()


class ServerProcess:
    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.port = int(self._proc.stdout.readline())
        self._ticks = os.sysconf("SC_CLK_TCK")

    def cpu_seconds(self) -> float | None:
        """The server process's user + system CPU time so far (Linux /proc only)."""
        try:
            fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self._ticks

    def stop(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# ---- the client ----

TIMEOUTS = Timeouts(connect=10.0, read=30.0, total=60.0)
PROMPT = (
    b'{"model":"bench-model","messages":[{"role":"system","content":"You review reports '
    b'and answer with one sentence."},{"role":"user","content":"'
    + b"Quarterly figures: revenue 12.4, costs 9.1, margin 3.3. " * 6
    + b'"}],"max_tokens":64,"temperature":0}'
)


def _request(base: str) -> HttpRequest:
    return HttpRequest(
        "POST",
        base + "/chat/completions",
        [
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-bench"),
            ("x-request-id", "bench-0001"),
        ],
        PROMPT,
    )


Factory = Callable[[str, int], list[Transport]]
"""(base_url, slots) -> one transport per slot (the same object repeated when shared)."""


def _lean(base: str, slots: int) -> list[Transport]:
    return [make_transport(base, kind="lean", max_connections=slots)] * slots


def _httpx_shared(base: str, slots: int) -> list[Transport]:
    return [make_transport(base, kind="httpx", max_connections=slots)] * slots


def _httpx_per_slot(base: str, slots: int) -> list[Transport]:
    return [HttpxTransport(max_connections=1) for _ in range(slots)]


class _FloorClient:
    """The floor: h11 over trio with one connection per slot and nothing else (no time
    limits, no error mapping, no retry, no header checks). Not a usable transport; it shows
    how much of the lean transport's cost is h11 and trio themselves."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._conn: tuple[trio.SocketStream, h11.Connection] | None = None

    async def send(self, request: HttpRequest, timeouts: Timeouts) -> HttpResponse:
        if self._conn is None:
            self._conn = (
                await trio.open_tcp_stream("127.0.0.1", self._port),
                h11.Connection(h11.CLIENT),
            )
        stream, conn = self._conn
        headers = [("host", "127.0.0.1"), ("content-length", str(len(request.body)))]
        out = conn.send(h11.Request(method="POST", target="/v1/chat/completions",
                                    headers=headers + list(request.headers)))  # fmt: skip
        out += conn.send(h11.Data(data=request.body)) + conn.send(h11.EndOfMessage())  # type: ignore[operator]
        await stream.send_all(out)  # type: ignore[arg-type]
        status, body = 0, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))  # type: ignore[arg-type]
            elif type(event) is h11.Response:
                status = event.status_code
            elif type(event) is h11.Data:
                body += event.data
            elif type(event) is h11.EndOfMessage:
                break
        conn.start_next_cycle()
        return HttpResponse(status, (), body)

    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn[0].aclose()


def _floor(base: str, slots: int) -> list[Transport]:
    port = int(base.rsplit(":", 1)[1].split("/", 1)[0])
    return [cast(Transport, _FloorClient(port)) for _ in range(slots)]


VARIANTS: dict[str, Factory] = {
    "h11-floor": _floor,
    "lean": _lean,
    "httpx-shared": _httpx_shared,
    "httpx-per-slot": _httpx_per_slot,
}


async def _one_run(
    factory: Factory,
    base: str,
    slots: int,
    *,
    requests: int,
    seconds: float,
    server: ServerProcess,
) -> tuple[float, float, float | None]:
    """Returns (client CPU µs per request, requests per second, server CPU µs per request)."""
    transports = factory(base, slots)
    request = _request(base)
    try:
        # Warm up: open every connection (one request per slot, all at once).
        async def warm(transport: Transport) -> None:
            response = await transport.send(request, TIMEOUTS)
            assert response.status == 200

        async with trio.open_nursery() as nursery:
            for transport in transports:
                nursery.start_soon(warm, transport)

        remaining = requests
        done = 0
        stop_at = trio.current_time() + seconds

        # Workers stop *starting* requests at the time limit and finish the ones in flight,
        # so the CPU measured is the CPU of the completed requests.
        async def worker(transport: Transport) -> None:
            nonlocal remaining, done
            while remaining > 0 and trio.current_time() < stop_at:
                remaining -= 1
                response = await transport.send(request, TIMEOUTS)
                if response.status != 200 or len(response.body) != len(COMPLETION):
                    raise RuntimeError(f"unexpected response {response!r}")
                done += 1

        gc.collect()
        server_before = server.cpu_seconds()
        cpu_before = time.process_time()
        wall_before = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for transport in transports:
                nursery.start_soon(worker, transport)
        wall = time.perf_counter() - wall_before
        cpu = time.process_time() - cpu_before
        server_after = server.cpu_seconds()
        server_us = None
        if server_before is not None and server_after is not None:
            server_us = (server_after - server_before) / done * 1e6
        return cpu / done * 1e6, done / wall, server_us
    finally:
        for transport in {id(t): t for t in transports}.values():
            await transport.aclose()


def _reference_cpu_us() -> float:
    """CPU µs of a fixed pure-Python loop (best of 5): how fast this machine runs right now.

    Printed with the table so that runs on the same machine can be compared: a larger figure
    means the process ran slower (contention from other processes, a busy host).
    """

    def loop() -> int:
        total = 0
        for i in range(1000):
            total += i
        return total

    best = math.inf
    for _ in range(5):
        start = time.process_time()
        for _ in range(200):
            loop()
        best = min(best, (time.process_time() - start) / 200 * 1e6)
    return best


async def _bench(args: argparse.Namespace) -> None:
    reference_before = _reference_cpu_us()
    load_before = os.getloadavg()[0]
    server = ServerProcess()
    base = f"http://127.0.0.1:{server.port}/v1"
    try:
        rows: list[tuple[int, dict[str, tuple[float, float, float | None]]]] = []
        for slots in args.connections:
            cells: dict[str, tuple[float, float, float | None]] = {}
            for name in args.variants:
                runs = [
                    await _one_run(
                        VARIANTS[name],
                        base,
                        slots,
                        requests=args.requests,
                        seconds=args.seconds,
                        server=server,
                    )
                    for _ in range(args.runs)
                ]
                server_runs = [r[2] for r in runs if r[2] is not None]
                cells[name] = (
                    statistics.median(r[0] for r in runs),
                    statistics.median(r[1] for r in runs),
                    statistics.median(server_runs) if server_runs else None,
                )
                print(
                    f"  slots={slots:<4} {name:<15} client {cells[name][0]:8.0f} µs/req "
                    f"{cells[name][1]:8.0f} req/s",
                    file=sys.stderr,
                    flush=True,
                )
            rows.append((slots, cells))
    finally:
        server.stop()
    _print_table(rows, args)
    reference_after = _reference_cpu_us()
    print(
        f"reference loop (1000 additions): {reference_before:.0f} µs CPU before, "
        f"{reference_after:.0f} µs after; load average at start {load_before:.1f} on "
        f"{os.cpu_count()} CPUs"
    )


def _print_table(
    rows: list[tuple[int, dict[str, tuple[float, float, float | None]]]],
    args: argparse.Namespace,
) -> None:
    names = args.variants
    httpx_names = [n for n in names if n.startswith("httpx")]
    with_lean = "lean" in names
    print()
    print(
        f"client CPU µs per request and requests/s (median of {args.runs} runs; each run "
        f"<= {args.requests} requests or {args.seconds:g} s)"
    )
    header = "| slots | " + " | ".join(f"{n} µs/req | {n} req/s" for n in names)
    header += " | server µs/req |"
    if with_lean and httpx_names:
        header += " best httpx / lean |"
    if with_lean and "h11-floor" in names:
        header += " lean / h11-floor |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for slots, cells in rows:
        line = f"| {slots} | " + " | ".join(f"{cells[n][0]:.0f} | {cells[n][1]:.0f}" for n in names)
        server_us = cells["lean" if with_lean else names[0]][2]
        line += f" | {server_us:.0f} |" if server_us is not None else " | n/a |"
        if with_lean and httpx_names:
            best = min(cells[n][0] for n in httpx_names)
            line += f" {best / cells['lean'][0]:.1f}x |"
        if with_lean and "h11-floor" in names:
            line += f" {cells['lean'][0] / cells['h11-floor'][0]:.2f} |"
        print(line)
    print("server µs/req: the server process's CPU per request during the lean runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--connections",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[8, 32, 128, 256],
        help="comma-separated slot counts (default 8,32,128,256)",
    )
    parser.add_argument(
        "--variants",
        type=lambda s: s.split(","),
        default=list(VARIANTS),
        help=f"comma-separated subset of {','.join(VARIANTS)}",
    )
    parser.add_argument("--requests", type=int, default=2000, help="requests per run")
    parser.add_argument("--seconds", type=float, default=2.0, help="time limit per run")
    parser.add_argument("--runs", type=int, default=3, help="runs per cell (median)")
    args = parser.parse_args()
    if args.serve:
        trio.run(_serve_main)
        return
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants: {sorted(unknown)}")
    trio.run(_bench, args)


if __name__ == "__main__":
    main()
