"""CPU cost of the OpenAI-compatible codec: encoding requests and decoding replies.

Cases (each timed as the median over several samples of many repetitions, in microseconds):

- ``encode``: a 20-message tool-using conversation (system prompt, 3 tools, user turns,
  assistant tool calls and tool results) to ``HttpRequest`` bytes, for the plain OpenAI and
  the Dynamo dialect. Baseline: ``orjson.dumps`` of the finished request body (a dict built
  beforehand), i.e. serialization alone.
- ``decode stream``: a 50-chunk streamed reply (48 text chunks, a finish chunk, a usage chunk,
  ``[DONE]``), fed whole, one SSE event per piece (what a server flushing per token sends)
  and in 64-byte pieces. Baseline: splitting the body at blank lines and ``orjson.loads`` of
  each JSON payload, i.e. parsing alone.
- ``decode complete``: a non-streamed completion with two tool calls. Baseline: ``orjson.loads``.
- ``sse 1 MiB line``: a 1 MiB ``data:`` line fed in 4 KiB pieces (guards against quadratic
  re-scanning of a long line). Baseline: the same bytes in one piece.

Run: ``.venv/bin/python bench/bench_codecs.py`` (``--help`` for the knobs). Runs in well under
a minute with the defaults.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import orjson

from agentcore import ModelParams
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import (
    AgentHints,
    AssistantMessage,
    CallModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentcore.wire import SSEDecoder

BASE = "http://127.0.0.1:8000/v1"


def conversation(messages: int = 20) -> CallModel:
    """A tool-using conversation of ``messages`` messages (system prompt included)."""
    tools = tuple(
        ToolSpec(
            name=f"tool_{i}",
            description=f"Tool number {i}: looks things up in the corpus and reports back.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                },
                "required": ["query"],
            },
        )
        for i in range(3)
    )
    history: list[object] = [SystemMessage("You review Python files for bugs. " * 20)]
    turn = 0
    while len(history) < messages - 1:
        call_id = f"call_{turn}"
        history.append(UserMessage(f"Look at part {turn} of the file:\n" + "x = 1\n" * 30))
        history.append(
            AssistantMessage(
                "Let me check.", (ToolCall(call_id, "tool_0", '{"query": "TODO", "limit": 5}'),)
            )
        )
        history.append(ToolMessage(call_id, "tool_0", "line 3: TODO fix\n" * 10))
        turn += 1
    history = history[: messages - 1]
    history.append(UserMessage("Now write the report."))
    return CallModel(
        request_id="bench-1",
        messages=tuple(history),  # type: ignore[arg-type]
        tools=tools,
        params=ModelParams(max_tokens=512, temperature=0.2),
        hints=AgentHints(session_id="run-1", turn=6, priority=6, expected_output_tokens=400),
    )


def stream_body(chunks: int = 50) -> bytes:
    """A streamed reply of ``chunks`` data events plus ``[DONE]``."""
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    events = []
    for i in range(chunks - 2):
        delta = {"content": f" token{i}"} if i else {"role": "assistant", "content": "The"}
        choice = {"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}
        events.append({**head, "choices": [choice]})
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    usage = {
        "prompt_tokens": 812,
        "completion_tokens": 48,
        "prompt_tokens_details": {"cached_tokens": 768},
    }
    events.append({**head, "choices": [], "usage": usage})
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    return body + b"data: [DONE]\n\n"


COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"call_{i}", "type": "function",
                         "function": {"name": "tool_0", "arguments": '{"query": "TODO"}'}}
                        for i in range(2)
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 812, "completion_tokens": 17,
                  "prompt_tokens_details": {"cached_tokens": 768}},
    }
)  # fmt: skip


def measure(fn: Callable[[], object], samples: int, target_s: float) -> float:
    """Median microseconds per call of ``fn`` over ``samples`` samples of ~``target_s`` each."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    repeat = max(1, int(target_s / once))
    results = []
    gc.disable()
    try:
        for _ in range(samples):
            start = time.perf_counter()
            for _ in range(repeat):
                fn()
            results.append((time.perf_counter() - start) / repeat * 1e6)
    finally:
        gc.enable()
    return statistics.median(results)


def _feed(codec: OpenAICodec, pieces: list[bytes]) -> Callable[[], object]:
    def run() -> object:
        decoder = codec.stream_decoder("bench-1")
        for piece in pieces:
            decoder.feed(piece)
        return decoder.finish()

    return run


def _parse_only(body: bytes) -> Callable[[], object]:
    def run() -> object:
        out = []
        for event in body.split(b"\n\n"):
            if event.startswith(b"data: {"):
                out.append(orjson.loads(event[6:]))
        return out

    return run


def _sse_pieces(pieces: list[bytes]) -> Callable[[], object]:
    def run() -> object:
        decoder = SSEDecoder()
        for piece in pieces:
            decoder.feed(piece)
        return decoder.finish()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU cost of the OpenAI-compatible codec.")
    parser.add_argument("--samples", type=int, default=9, help="samples per case (median)")
    parser.add_argument("--sample-seconds", type=float, default=0.2, help="length of a sample")
    args = parser.parse_args()
    samples, target = args.samples, args.sample_seconds

    call = conversation(20)
    openai = OpenAICodec(base_url=BASE, model="m", dialect="openai")
    dynamo = OpenAICodec(base_url=BASE, model="m", dialect="dynamo", extra_fields=["timing"])
    prebuilt = orjson.loads(openai.encode(call).body)
    body = stream_body(50)
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e]
    small = [body[i : i + 64] for i in range(0, len(body), 64)]
    big_line = b"data: " + b"x" * (1 << 20) + b"\n\n"
    big_pieces = [big_line[i : i + 4096] for i in range(0, len(big_line), 4096)]

    rows: list[tuple[str, str, float, float]] = []

    def case(name: str, detail: str, fn: Callable[[], object], baseline: float) -> None:
        rows.append((name, detail, measure(fn, samples, target), baseline))

    encode_base = measure(lambda: orjson.dumps(prebuilt), samples, target)
    case("encode 20 messages", "openai", lambda: openai.encode(call), encode_base)
    case("encode 20 messages", "dynamo (hints, headers)", lambda: dynamo.encode(call), encode_base)
    case(
        "encode 20 messages",
        "openai, stream",
        lambda: openai.encode(call, stream=True),
        encode_base,
    )

    parse_base = measure(_parse_only(body), samples, target)
    case("decode stream 50 chunks", "whole body", _feed(openai, [body]), parse_base)
    case("decode stream 50 chunks", "one event per piece", _feed(openai, events), parse_base)
    case("decode stream 50 chunks", "64-byte pieces", _feed(openai, small), parse_base)

    loads_base = measure(lambda: orjson.loads(COMPLETION), samples, target)
    case(
        "decode complete",
        "2 tool calls",
        lambda: openai.decode("r", 200, (), COMPLETION),
        loads_base,
    )

    whole_line = measure(_sse_pieces([big_line]), max(3, samples // 3), target)
    case("sse 1 MiB line", "4 KiB pieces", _sse_pieces(big_pieces), whole_line)

    print(f"{len(body)} byte stream, {len(openai.encode(call).body)} byte request body")
    print(f"{'case':<26} {'variant':<26} {'median us':>11} {'baseline us':>12} {'ratio':>7}")
    for name, detail, value, base in rows:
        print(f"{name:<26} {detail:<26} {value:>11.1f} {base:>12.1f} {value / base:>7.2f}")
    print(
        "baselines: encode = orjson.dumps of the finished body; decode stream = split + "
        "orjson.loads per event; decode complete = orjson.loads; sse = the line in one piece"
    )


if __name__ == "__main__":
    main()
