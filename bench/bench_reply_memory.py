"""Memory one large reply costs the client: traced peak and resident growth per exchange.

A server process on 127.0.0.1 answers chat completions of about ``--mb`` MB of body, in four
shapes: the reply's text as one ``content`` string or as the arguments of one tool call, each
as one JSON document (``plain``) or as an SSE stream (``streamed``: one HTTP chunk per event,
``--delta`` characters of text or arguments per event, as vLLM frames them). For each source
tree (``--src``, repeatable; the working tree's ``src`` by default), transport (lean, httpx)
and shape, a fresh client process performs one exchange through ``HttpModelClient`` (after a
small warm-up exchange) and reports

- ``peak``: the traced peak (``tracemalloc``) during the exchange, the kept result included,
  as a multiple of the body's size;
- ``rss``: the growth of the process's peak resident set (``ru_maxrss``) over the exchange,
  measured in a run without ``tracemalloc``, in MB.

Each cell is the median of ``--repeats`` processes:

    git archive HEAD src | tar -x -C /tmp/base
    .venv/bin/python bench/bench_reply_memory.py --src /tmp/base/src --src src
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
from pathlib import Path

from _common import child_report

ROOT = Path(__file__).resolve().parents[1]

SHAPES = ("content", "tool")
MODES = ("plain", "streamed")
TRANSPORTS = ("lean", "httpx")

# ---- the server (separate process) ----

_WORDS = b"the quick brown fox jumps over the lazy dog while agents stream long replies "


def _text(size: int) -> str:
    return (_WORDS * (size // len(_WORDS) + 1))[:size].decode()


def _completion(shape: str, size: int) -> bytes:
    if shape == "content":
        message: dict[str, object] = {"role": "assistant", "content": _text(size)}
    else:
        arguments = json.dumps({"text": _text(size - 12)})
        function = {"name": "save", "arguments": arguments}
        call = {"id": "call_1", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "bench-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": size // 4, "total_tokens": 0},
        }
    ).encode()


def _chunk_event(delta: dict[str, object], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "bench-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    data = b"data: " + json.dumps(payload).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _stream(shape: str, size: int, delta: int) -> bytes:
    """A chunked SSE body of about ``size`` bytes (framing included)."""
    pieces: list[bytes] = []
    total = 0
    first = True
    while total < size:
        text = _text(delta)
        if shape == "content":
            event = _chunk_event({"content": text})
        else:
            call: dict[str, object] = {"index": 0, "function": {"arguments": text}}
            if first:
                call.update(id="call_1", function={"name": "save", "arguments": text})
            event = _chunk_event({"tool_calls": [call]})
        first = False
        pieces.append(event)
        total += len(event)
    pieces.append(_chunk_event({}, "stop"))
    done = b"data: [DONE]\n\n"
    pieces.append(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
    return b"".join(pieces)


def _response(target: str) -> bytes:
    # /{shape}/{mode}/{size}/{delta}/v1/chat/completions
    _, shape, mode, size, delta, *_ = target.split("/")
    if mode == "plain":
        body = _completion(shape, int(size))
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        return head % len(body) + body
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
    return head + b"\r\n\r\n" + _stream(shape, int(size), int(delta))


def _serve_connection(conn: socket.socket, cache: dict[str, bytes], lock: threading.Lock) -> None:
    buffer = b""
    with conn:
        while True:
            while (end := buffer.find(b"\r\n\r\n")) < 0:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            lines = buffer[:end].decode("latin-1").split("\r\n")
            target = lines[0].split(" ")[1]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            while len(buffer) < end + 4 + length:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            buffer = buffer[end + 4 + length :]
            with lock:
                response = cache.get(target)
                if response is None:
                    response = cache[target] = _response(target)
            conn.sendall(response)


def serve() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    cache: dict[str, bytes] = {}
    lock = threading.Lock()
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve_connection, args=(conn, cache, lock), daemon=True).start()


# ---- the client (a process per measurement) ----

_CLIENT = r"""
import gc, json, resource, sys, tracemalloc
import trio
from agentcore._codecs.openai import OpenAICodec
from agentcore._transports.factory import make_transport
from agentcore._transports.model_client import HttpModelClient
from agentcore.core import CallModel, ModelResponded, UserMessage

port, transport_kind, path, traced = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "1"
stream = "/streamed/" in path
call = CallModel("mem-0/0", (UserMessage("Write the whole report."),))

def peak_rss():  # the peak resident set in kB: VmHWM (resettable), else ru_maxrss
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

def reset_peak_rss():  # the peak back to the current resident set (Linux)
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass
    return peak_rss()

def client(base):
    codec = OpenAICodec(base_url=base, model="bench-model")
    transport = make_transport(base, kind=transport_kind, max_connections=2)
    return HttpModelClient(codec, transport, stream=stream)

async def main():
    root = f"http://127.0.0.1:{port}"
    small = client(root + path.replace(path.split("/")[3], "2000", 1))
    warm = await small.exchange(call)
    assert isinstance(warm.event, ModelResponded), warm
    await small.aclose()
    big = client(root + path)
    gc.collect()
    rss = reset_peak_rss()
    if traced:
        tracemalloc.start()
    exchange = await big.exchange(call)
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    tracemalloc.stop()
    grown = peak_rss() - rss
    event = exchange.event
    assert isinstance(event, ModelResponded), event
    message = event.message
    size = len(message.content or "") + sum(len(c.arguments) for c in message.tool_calls)
    await big.aclose()
    print(json.dumps({"peak": peak, "rss_kb": grown, "text": size}))

trio.run(main)
"""


def _body_size(path: str) -> int:
    _, shape, mode, size, delta, *_ = path.split("/")
    if mode == "plain":
        return len(_completion(shape, int(size)))
    return len(_stream(shape, int(size), int(delta)))


def measure(src: Path, port: int, transport: str, path: str, traced: bool) -> dict[str, object]:
    argv = [sys.executable, "-c", _CLIENT, str(port), transport, path, "1" if traced else "0"]
    return child_report(argv, src=src)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mb", type=float, default=10.0, help="reply body size in MB")
    parser.add_argument("--delta", type=int, default=64, help="characters per streamed event")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--transport", action="append", choices=TRANSPORTS)
    parser.add_argument("--mode", action="append", choices=MODES)
    parser.add_argument("--shape", action="append", choices=SHAPES)
    parser.add_argument("--src", action="append", type=Path, help="a source tree (repeatable)")
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return 0
    sources = args.src or [ROOT / "src"]
    size = int(args.mb * 1_000_000)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        print(
            f"one exchange of a ~{args.mb:g} MB reply through HttpModelClient, streamed events of "
            f"{args.delta} characters; peak: traced peak / body size; rss: peak RSS growth; "
            f"median of {args.repeats}"
        )
        print(
            f"{'tree':<28} {'transport':<9} {'mode':<9} {'shape':<8} {'body MB':>8} "
            f"{'peak':>7} {'peak MB':>8} {'rss MB':>7}"
        )
        for transport in args.transport or TRANSPORTS:
            for mode in args.mode or MODES:
                for shape in args.shape or SHAPES:
                    path = f"/{shape}/{mode}/{size}/{args.delta}/v1"
                    body = _body_size(path)
                    for src in sources:
                        peaks = [
                            int(measure(src, port, transport, path, True)["peak"])  # type: ignore[call-overload]
                            for _ in range(args.repeats)
                        ]
                        rss = [
                            int(measure(src, port, transport, path, False)["rss_kb"])  # type: ignore[call-overload]
                            for _ in range(args.repeats)
                        ]
                        peak = statistics.median(peaks)
                        grown = statistics.median(rss) / 1e3
                        tree = str(src)[-28:]
                        print(
                            f"{tree:<28} {transport:<9} {mode:<9} {shape:<8} {body / 1e6:>8.1f} "
                            f"{peak / body:>6.1f}x {peak / 1e6:>8.1f} {grown:>7.1f}",
                            flush=True,
                        )
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
