"""The command-line side of distributed batches: ``agentcore worker`` and ``run --queue``."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from .._core.errors import ConfigError
from .._distributed.address import QueueAddress
from .._distributed.submitter import submit_batch
from .._distributed.worker import run_worker
from .._tasks.task import Task

__all__ = ["run_submitter", "run_worker_command"]


def run_worker_command(
    task: Task, queue: str, *, quiet: bool, worker_options: dict[str, Any]
) -> int:
    """Run a worker until the batch is finished (``exit_when_done``) or SIGINT/SIGTERM, which
    stop it gracefully: the last short read expires and the steps in progress finish."""

    async def main() -> Any:
        outcome: dict[str, Any] = {}
        async with trio.open_nursery() as nursery:

            async def body(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
                outcome["stats"] = await run_worker(
                    queue, task, task_status=task_status, **worker_options
                )
                nursery.cancel_scope.cancel()

            worker = await nursery.start(body)
            nursery.start_soon(_stop_on_signal, worker.stop)
        return outcome["stats"]

    QueueAddress.parse(queue)  # a bad URL is a usage error before anything starts
    try:
        stats = trio.run(main)
    except BaseExceptionGroup as group:
        # The worker runs in a nursery: give a lone configuration error to the CLI as itself.
        errors = group.exceptions
        if len(errors) == 1 and isinstance(errors[0], ConfigError):
            raise errors[0] from None
        raise
    if not quiet:
        rows = attrs.asdict(stats)
        width = max(map(len, rows))
        print("\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows.items()), file=sys.stderr)
    return 0


async def _stop_on_signal(stop: Callable[[], None]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            print("agentcore worker: stopping after the steps in progress", file=sys.stderr)
            stop()


def run_submitter(
    task: Task,
    inputs: Sequence[Any],
    output: Path,
    queue: str,
    *,
    window: int,
    progress: bool,
) -> tuple[str, bool]:
    """Submit and collect; returns a summary line and whether every input finished ok."""
    written = [0]

    def on_result(_: dict[str, Any]) -> None:
        written[0] += 1
        if progress:
            sys.stderr.write(f"\r{written[0]} results written")
            sys.stderr.flush()

    report = trio.run(
        lambda: submit_batch(queue, task, inputs, output, window=window, on_result=on_result)
    )
    if progress:
        sys.stderr.write("\n")
    statuses = [orjson.loads(line).get("status") for line in output.read_bytes().splitlines()]
    summary = (
        f"  {report.total} inputs: {report.already_done} were already in {output}, "
        f"{report.written} written now ({report.ok} ok); "
        f"{statuses.count('ok')} ok in the file"
    )
    return summary, all(s == "ok" for s in statuses)
