"""``agentcore run --backend openai-batch://``: the journal beside the results file, and the
progress lines that say which hop is waiting and since when."""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO

import trio

from .._driver.driver import Driver
from .._transports.batching import BatchModelClient

__all__ = ["journal_path", "show_hops"]

JOURNAL_SUFFIX = ".batch-journal.jsonl"


def journal_path(results: Path) -> Path:
    """The batch journal of a results file: ``out.jsonl`` -> ``out.jsonl.batch-journal.jsonl``."""
    return results.with_name(results.name + JOURNAL_SUFFIX)


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(seconds))


async def show_hops(driver: Driver, out: IO[str], every: float = 1.0) -> None:
    """Print a line each time a hop of the driver's batch client changes status (forever).

    Hops are looked at every ``every`` seconds, or at the client's first-poll interval when
    that is shorter (a hop's status changes when it is polled).
    """
    client = driver.client
    if not isinstance(client, BatchModelClient):
        return
    every = min(every, client.poll)
    shown: dict[int, str] = {}
    while True:
        for hop in client.hops():
            if shown.get(hop.number) == hop.status:
                continue
            shown[hop.number] = hop.status
            batch = f" batch {hop.batch_id}" if hop.batch_id else ""
            print(
                f"hop {hop.number}:{batch} {hop.status} since {_clock(hop.since)} "
                f"({hop.requests} requests, {hop.done} answered)",
                file=out,
                flush=True,
            )
        live = {hop.number for hop in client.hops()}
        for number in [n for n in shown if n not in live]:
            del shown[number]
        await trio.sleep(every)
