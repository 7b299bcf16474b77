"""One client of the rate-limit benchmark: N one-question agents against an OpenAI-compatible
server, run as a child process of ``bench_ratelimit.py``. Prints one JSON report line.

``--mode agentcore``: ``run_batch`` through ``open_driver`` (``--tpm`` configures a token
budget; ``--adaptive`` turns adaptive concurrency on). Whatever agentcore is first on
``sys.path`` is measured, so the parent can point it at an older checkout.
``--mode minimal``: trio + httpx by hand; a ``trio.Semaphore`` bounds the requests in flight
and a 429 is retried after the server's ``retry-after-ms`` / ``retry-after``, as a careful
hand-written loop would.

Run: ``python ratelimit_client.py --mode agentcore --url http://127.0.0.1:PORT/v1 --n 1000``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import emit, self_cpu

SYSTEM = (
    "You are a careful assistant answering short questions about a product catalogue. "
    "Answer in two sentences, cite the catalogue section you used, and say so when the "
    "catalogue does not cover the question. " * 4
)
QUESTION = "Question {i}: which catalogue section covers item {i}, and is it in stock?"
MAX_ATTEMPTS = 30


async def run_agentcore(args: argparse.Namespace) -> dict[str, Any]:
    import agentcore

    options: dict[str, Any] = {}
    if args.tpm:
        options["tokens_per_minute"] = args.tpm
    task = agentcore.Task(prompt=QUESTION, system=SYSTEM, max_turns=1)
    retry = agentcore.RetryPolicy(max_attempts=MAX_ATTEMPTS, max_elapsed=3600.0)
    async with agentcore.open_driver(
        args.url,
        model="sim",
        max_inflight=args.slots,
        adaptive=args.adaptive,
        retry=retry,
        **options,
    ) as driver:
        results = await agentcore.run_batch(
            task, [{"i": i} for i in range(args.n)], driver=driver, warm=False
        )
        stats = driver.statistics()
    requests = stats.requests if isinstance(stats.requests, int) else len(stats.requests)
    return {
        "ok": sum(r.status == "ok" for r in results),
        "failed": sum(r.status != "ok" for r in results),
        "requests": requests,
        "attempts": stats.attempts,
        "tokens": stats.prompt_tokens + stats.completion_tokens,
    }


async def run_minimal(args: argparse.Namespace) -> dict[str, Any]:
    slots = trio.Semaphore(args.slots)
    endpoint = args.url.rstrip("/") + "/chat/completions"
    counts = {"ok": 0, "failed": 0, "requests": 0, "attempts": 0, "tokens": 0}
    limits = httpx.Limits(max_connections=args.slots, max_keepalive_connections=args.slots)
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0), limits=limits) as client:

        async def agent(i: int) -> None:
            body = orjson.dumps(
                {
                    "model": "sim",
                    "messages": [
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": QUESTION.format(i=i)},
                    ],
                }
            )
            counts["requests"] += 1
            for _ in range(MAX_ATTEMPTS):
                counts["attempts"] += 1
                async with slots:
                    answer = await client.post(
                        endpoint, content=body, headers={"content-type": "application/json"}
                    )
                if answer.status_code == 429:
                    millis = answer.headers.get("retry-after-ms")
                    wait = float(millis) / 1000 if millis else float(answer.headers["retry-after"])
                    await trio.sleep(wait)
                    continue
                if answer.status_code == 200:
                    usage = orjson.loads(answer.content)["usage"]
                    counts["tokens"] += usage["prompt_tokens"] + usage["completion_tokens"]
                    counts["ok"] += 1
                    return
                break
            counts["failed"] += 1

        async with trio.open_nursery() as nursery:
            for i in range(args.n):
                nursery.start_soon(agent, i)
    return counts


async def main(args: argparse.Namespace) -> None:
    cpu0, t0 = self_cpu(), time.perf_counter()
    report = await (run_agentcore(args) if args.mode == "agentcore" else run_minimal(args))
    emit({"wall": time.perf_counter() - t0, "cpu": self_cpu() - cpu0, **report})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["agentcore", "minimal"], required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--tpm", type=int, default=0, help="configured tokens per minute")
    parser.add_argument("--adaptive", action="store_true")
    trio.run(main, parser.parse_args())
