"""``agentcore run --backend openai-batch://``: the journal beside the results file, and the
hop lines that say what each hop did: its submission (with the time the provider's window
closes), its statuses and progress by tenths, and its end (how, when, after how long), a split,
a refusal or a cancel. Hop numbers continue from the journal's after a resume."""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO

import trio

from .._driver.driver import Driver
from .._transports.batching import BatchModelClient, HopView

__all__ = ["hop_line", "journal_path", "show_hops"]

JOURNAL_SUFFIX = ".batch-journal.jsonl"


def journal_path(results: Path) -> Path:
    """The batch journal of a results file: ``out.jsonl`` -> ``out.jsonl.batch-journal.jsonl``."""
    return results.with_name(results.name + JOURNAL_SUFFIX)


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(seconds))


def hop_line(hop: HopView) -> str:
    """One line about a hop change: ``hop 2: batch batch_abc in_progress since 14:02:11
    (100 requests, 37 answered)``, or what the change's note says."""
    batch = f" batch {hop.batch_id}" if hop.batch_id else ""
    if hop.note:
        return f"hop {hop.number}:{batch} {hop.note}"
    failed = f", {hop.failed} failed" if hop.failed else ""
    return (
        f"hop {hop.number}:{batch} {hop.status} since {_clock(hop.since)} "
        f"({hop.requests} requests, {hop.done} answered{failed})"
    )


async def show_hops(driver: Driver, out: IO[str], every: float = 1.0) -> None:
    """Print a line for each change of a hop of the driver's batch client (forever).

    Changes are looked at every ``every`` seconds, or at the client's first-poll interval when
    that is shorter (a hop's status changes when it is polled); none is missed between looks.
    """
    client = driver.client
    if not isinstance(client, BatchModelClient):
        return
    every = min(every, client.poll)
    seen = 0
    try:
        while True:
            changes, seen = client.changes(seen)
            for hop in changes:
                print(hop_line(hop), file=out, flush=True)
            await trio.sleep(every)
    finally:  # the last changes, when the batch is over
        for hop in client.changes(seen)[0]:
            print(hop_line(hop), file=out, flush=True)
