"""The web-service examples, as real server processes on 127.0.0.1 called with httpx:
examples/service_trio.py (hypercorn, trio, one shared driver) and examples/service_fastapi.py
(uvicorn, asyncio, the embedding loop)."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.extras import skip_without

EXTRA = "needs the service extra: pip install 'trio-agentcore[service]'"
skip_without("hypercorn", "fastapi", "uvicorn", reason=EXTRA)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-do-not-log-0123456789"
# Long enough that a run is surely still going when a test disconnects from it.
ENV = {**os.environ, "SERVICE_TOOL_SECONDS": "1.0"}
SIM = (
    "from agentcore._sim import SimConfig, run_sim_server; "
    "run_sim_server('127.0.0.1', 0, SimConfig(speedup=10))"
)


class Server:
    def __init__(self, argv: list[str]) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        fd = self.listener.fileno()
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.process = subprocess.Popen(
            [*argv, "--fd", str(fd)],
            pass_fds=(fd,),
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.output()
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the service did not come up in 60 s"
            time.sleep(0.2)

    def output(self) -> str:
        self.stop()
        assert self.process.stdout is not None
        return self.process.stdout.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.listener.close()

    def close(self) -> None:
        """Stop the service and close its output."""
        self.stop()
        assert self.process.stdout is not None
        self.process.stdout.close()


HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Gate:
    """An HTTP proxy in front of the simulator that forwards every request, except that it
    holds the model requests of the run about record ``gone`` until :meth:`open` is called.

    ``held`` is set once such a request arrives: that run is then surely under way and cannot
    end before the gate opens, whatever the machine's load, so a client can leave it without
    racing its end."""

    def __init__(self, target: str) -> None:
        self.held = threading.Event()
        self.opened = threading.Event()
        self.opened.set()
        where = target.split("//", 1)[1].split("/", 1)[0]
        host, port = where.rsplit(":", 1)
        gate = self

        class Forward(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            upstream: http.client.HTTPConnection | None = None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if b"record gone" in body:
                    gate.held.set()
                    gate.opened.wait(120)
                if self.upstream is None:
                    self.upstream = http.client.HTTPConnection(host, int(port), timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                self.upstream.request(self.command, self.path, body, headers)
                reply = self.upstream.getresponse()
                data = reply.read()
                try:
                    self.send_response(reply.status)
                    for key, value in reply.getheaders():
                        if key.lower() not in HOP_BY_HOP:
                            self.send_header(key, value)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the service left (a held run it cancelled)
                    self.close_connection = True

            do_GET = do_POST

            def finish(self) -> None:
                if self.upstream is not None:
                    self.upstream.close()
                super().finish()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}" + target.split(where, 1)[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def arm(self) -> None:
        """Hold the next model requests about ``gone``."""
        self.opened.clear()
        self.held.clear()

    def open(self) -> None:
        """Let held requests (and later ones about ``gone``) through."""
        self.opened.set()

    def close(self) -> None:
        self.open()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=30)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    process = subprocess.Popen([sys.executable, "-c", SIM], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        assert line.startswith("agentcore sim: serving http://127.0.0.1:"), line
        yield line.split("serving ", 1)[1].split()[0]
    finally:
        process.kill()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


@pytest.fixture(scope="module")
def gate(sim_url: str) -> Iterator[Gate]:
    gate = Gate(sim_url)
    try:
        yield gate
    finally:
        gate.close()


@pytest.fixture(scope="module", params=["trio", "fastapi"])
def service(request: pytest.FixtureRequest, gate: Gate) -> Iterator[tuple[str, Server]]:
    if request.param == "trio":
        argv = [sys.executable, "examples/service_trio.py", "--backend", gate.url]
    else:
        argv = [sys.executable, "examples/service_fastapi.py", "--backend", gate.url]
    server = Server(argv)
    try:
        yield request.param, server
    finally:
        server.close()


async def stats(client: httpx.AsyncClient) -> dict[str, Any]:
    reply = await client.get("/stats")
    data: dict[str, Any] = reply.json()
    return data


async def test_a_hundred_concurrent_runs_all_succeed(service: tuple[str, Server]) -> None:
    kind, server = service
    replies: list[httpx.Response] = []
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
        before = await stats(client)

        async def one(i: int) -> None:
            replies.append(await client.post("/runs", json={"inputs": {"record": f"r{i}"}}))

        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(one, i)
        elapsed = trio.current_time() - started
        after = await stats(client)
    assert [r.status_code for r in replies] == [200] * 100
    assert all(r.json()["status"] == "ok" for r in replies)
    assert after["service"]["served"] - before["service"]["served"] == 100
    # Each run waits about 1 s in its tool: served one after another they would take 100 s.
    assert elapsed < 60
    if kind == "trio":
        driver = after["driver"]
        assert driver["peak_slots_in_use"] > 1  # the runs shared the driver's slots
        # Identical tool calls of concurrent agents ran once (coalescing in the shared driver).
        assert driver["tool_executions"] < driver["tool_calls"]


@pytest.mark.parametrize("route", ["/runs", "/runs/stream"])
async def test_a_client_that_disconnects_cancels_only_its_own_agent(
    service: tuple[str, Server], gate: Gate, route: str
) -> None:
    _, server = service
    gate.arm()  # the run about "gone" cannot end before the client has left
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            before = (await stats(client))["service"]
            kept: list[httpx.Response] = []

            async def stays(i: int) -> None:
                kept.append(await client.post("/runs", json={"inputs": {"record": f"k{i}"}}))

            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(stays, i)
                with trio.CancelScope() as leave:

                    async def when_held() -> None:
                        await trio.to_thread.run_sync(gate.held.wait, 60, abandon_on_cancel=True)
                        leave.cancel()  # its model request is held: the run is under way

                    nursery.start_soon(when_held)
                    body = {"inputs": {"record": "gone"}}
                    async with client.stream("POST", route, json=body) as r:
                        async for _ in r.aiter_bytes():
                            pass
                    raise AssertionError("the run ended before the client left")
            assert gate.held.is_set()
            with trio.fail_after(30):
                while (now := (await stats(client))["service"])["active"]:
                    await trio.sleep(0.1)
    finally:
        gate.open()
    assert [r.json()["status"] for r in kept] == ["ok"] * 3
    assert now["disconnected"] - before["disconnected"] == 1
    assert now["served"] - before["served"] == 3


async def test_the_stream_sends_started_then_the_result(service: tuple[str, Server]) -> None:
    kind, server = service
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        body = {"inputs": {"record": "s1"}}
        async with client.stream("POST", "/runs/stream", json=body) as reply:
            assert reply.status_code == 200
            assert reply.headers["content-type"].startswith("text/event-stream")
            text = (await reply.aread()).decode()
    frames = [f for f in text.split("\n\n") if f.strip()]
    names = [f.splitlines()[0].removeprefix("event: ") for f in frames]
    assert names[0] == "started" and names[-1] == "result"
    assert '"status": "ok"' in frames[-1].replace('":"', '": "')
    if kind == "trio":  # the trio service streams the agent's step events in between
        steps = names[1:-1]
        assert steps[0] == "run_started" and steps[-1] == "run_finished"
        assert "model_replied" in steps and "tool_ended" in steps
        assert "model_delta" not in steps  # tokens are opt-in


DOCUMENTED_CALL = re.compile(r"^curl -sN? localhost:(\d+)(/\S*) -d '(.*)'$", re.MULTILINE)
DOCUMENTED_PORTS = {"8080": "trio", "8081": "fastapi"}


async def test_the_documented_curl_calls_work(service: tuple[str, Server]) -> None:
    await documented_calls_work(*service)


@pytest.fixture
def embedded_trio_service() -> Iterator[Server]:
    """The trio service as docs/services.md starts it: its embedded ``sim://`` backend."""
    server = Server([sys.executable, "examples/service_trio.py"])
    try:
        yield server
    finally:
        server.close()


async def test_the_documented_calls_work_on_the_trio_services_embedded_simulator(
    embedded_trio_service: Server,
) -> None:
    await documented_calls_work("trio", embedded_trio_service)


async def documented_calls_work(kind: str, server: Server) -> None:
    """The curl calls docs/services.md shows for ``kind`` answer 200 and an ``ok`` result."""
    text = (ROOT / "docs" / "services.md").read_text()
    calls = [
        (path, body)
        for port, path, body in DOCUMENTED_CALL.findall(text)
        if DOCUMENTED_PORTS[port] == kind
    ]
    assert {path for path, _ in calls} == {"/runs", "/runs/stream"}
    # What ``curl -d`` sends: the body as written, with curl's form content type.
    headers = {"content-type": "application/x-www-form-urlencoded", "accept": "*/*"}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        for path, body in calls:
            reply = await client.post(path, content=body.encode(), headers=headers)
            assert reply.status_code == 200, (path, reply.text)
            if path == "/runs":
                assert reply.json()["status"] == "ok"
            else:
                last = [f for f in reply.text.split("\n\n") if f.strip()][-1]
                assert last.startswith("event: result")
                assert '"status": "ok"' in last.replace('":"', '": "')


async def test_the_trio_stream_sends_the_reply_text_as_it_arrives_when_asked(
    service: tuple[str, Server],
) -> None:
    kind, server = service
    if kind != "trio":
        pytest.skip("the asyncio service streams the result only")
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        body = {"inputs": {"record": "t1"}, "tokens": True}
        async with client.stream("POST", "/runs/stream", json=body) as reply:
            text = (await reply.aread()).decode()
    names = [f.splitlines()[0].removeprefix("event: ") for f in text.split("\n\n") if f.strip()]
    assert names.count("model_delta") > 0 and names[-1] == "result"


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/runs", b"{not json " + SECRET.encode(), {400, 422}),
        ("POST", "/runs", b'{"inputs": {"other": "' + SECRET.encode() + b'"}}', {422}),
        ("POST", "/runs", b'{"inputs": ["' + SECRET.encode() + b'"]}', {422}),
        ("POST", "/runs", b'{"inputs": {"record": {"nested": 1}}}', {422}),
        ("GET", "/runs", b"", {405}),
        ("GET", "/nowhere", b"", {404}),
    ],
)
async def test_bad_requests_get_a_clear_4xx_json_answer(
    service: tuple[str, Server], method: str, path: str, body: bytes, status: set[int]
) -> None:
    _, server = service
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        reply = await client.request(
            method, path, content=body, headers={"content-type": "application/json"}
        )
        assert (await client.get("/health")).status_code == 200  # still serving
    assert reply.status_code in status
    error = reply.json()
    assert set(error) & {"error", "detail"}


def test_nothing_a_client_sent_is_logged(service: tuple[str, Server]) -> None:
    # Runs after the bad requests above (same module-scoped server): their bodies held SECRET.
    _, server = service
    with httpx.Client(base_url=server.url, timeout=30) as client:
        client.post("/runs", content=SECRET.encode(), headers={"authorization": SECRET})
    server.stop()
    assert server.process.stdout is not None
    logged = server.process.stdout.read().decode(errors="replace")
    assert SECRET not in logged
