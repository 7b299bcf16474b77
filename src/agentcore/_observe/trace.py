"""A batch as Chrome trace-event JSON, written while it runs (open it in https://ui.perfetto.dev
or ``chrome://tracing``, or render it with ``agentcore trace``).

Theory of operation
-------------------
:class:`TraceWriter` is an observer (:mod:`._observe.observer`). Each hook turns into trace
events that go straight to the file, one JSON object per line inside a JSON array, so the
trace of a batch of any size costs memory only for what is in flight: the lanes in use and
the tokens of running attempts and tool executions. The file is valid JSON once the writer is
closed; a trace cut short by a crash still loads in Perfetto (it accepts a missing ``]``), and
:func:`read_trace` reads it line by line.

Tracks (``pid``/``tid`` in the trace format):

- *inference slots* (pid 1): one track per slot. An attempt that holds a slot is a slice
  ``agent N · turn T`` (``attempt A`` when retried), with a nested ``streaming`` slice from
  the first token to the end when the reply was streamed (its start is the TTFT). A failed
  attempt is named after its error kind and coloured as an error. A slot's track number is
  the lowest one free when the attempt got the slot, so at most ``max_inflight`` tracks exist.
- *tool executions* (pid 2): one slice per execution, named ``tool (W calls)`` when W calls shared
  it (coalesced waiters), on as many tracks as executions ran at once.
- *back-offs* (pid 3): a slice per back-off sleep between attempts (no slot held).
- counters (pid 4): slots in use, requests waiting for a slot, agents running, results.
- instant events (pid 4): each agent's end, with its status.

Times are microseconds since the writer opened, from trio's clock. A write that fails (a
full disk) stops the tracing with a warning on ``agentcore.batch``; the batch goes on.
"""

from __future__ import annotations

import contextlib
import heapq
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

from .log import BATCH

if TYPE_CHECKING:
    from .._codecs.exchange import Exchange
    from .._core.events import CallModel, ModelError, ModelFailed, ModelResponded, ToolError
    from .._core.results import Result

__all__ = ["SLOTS_PID", "TraceWriter", "read_trace"]

SLOTS_PID, TOOLS_PID, BACKOFF_PID, BATCH_PID = 1, 2, 3, 4
_PROCESS_NAMES = {
    SLOTS_PID: "inference slots",
    TOOLS_PID: "tool executions",
    BACKOFF_PID: "back-offs (no slot held)",
    BATCH_PID: "batch",
}


class _Lanes:
    """Track numbers handed out lowest-free-first, so tracks are reused."""

    def __init__(self) -> None:
        self._free: list[int] = []
        self._next = 1

    def take(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        lane = self._next
        self._next += 1
        return lane

    def give(self, lane: int) -> None:
        heapq.heappush(self._free, lane)

    @property
    def used(self) -> int:
        return self._next - 1


class TraceWriter:
    """Writes a batch's timeline to ``path`` as it happens (see the module documentation).

    Args:
        path: the trace file (replaced).
        now: the trio time the trace starts at.
    """

    def __init__(self, path: str | os.PathLike[str], now: float) -> None:
        self._path = Path(path)
        self._file: IO[bytes] | None = self._path.open("wb", buffering=1 << 16)
        self._origin = now
        self._slots = _Lanes()
        self._tools = _Lanes()
        self._backoffs = _Lanes()
        self._backoff_ends: list[tuple[float, int]] = []
        self._in_use = 0
        self._waiting = 0
        self._running = 0
        self._done = {"ok": 0, "failed": 0, "cancelled": 0}
        self._file.write(b"[\n")
        for pid, name in _PROCESS_NAMES.items():
            self._emit({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
            self._emit(
                {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}
            )

    # -------------------------------------------------------------------- plumbing

    def _us(self, t: float) -> float:
        return round((t - self._origin) * 1e6, 1)

    def _emit(self, event: dict[str, Any]) -> None:
        if self._file is not None:
            try:
                self._file.write(orjson.dumps(event) + b",\n")
            except OSError as exc:
                # A full disk must not take the batch down: stop tracing, say so once.
                BATCH.warning("trace file %s: %s; tracing stopped", self._path, exc)
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None

    def _counter(self, name: str, now: float, **values: int) -> None:
        self._emit({"name": name, "ph": "C", "ts": self._us(now), "pid": BATCH_PID, "args": values})

    def _thread_name(self, pid: int, lane: int, used_before: int, name: str) -> None:
        if lane > used_before:
            self._emit(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": pid,
                    "tid": lane,
                    "args": {"name": f"{name} {lane}"},
                }
            )

    # -------------------------------------------------------------------- runs

    def run_started(self, index: int, now: float) -> None:
        self._running += 1
        self._counter("agents running", now, running=self._running)

    def run_ended(self, result: Result, now: float) -> None:
        self._running -= 1
        self._done[result.status] += 1
        ts = self._us(now)
        args: dict[str, Any] = {"agent": result.index, "status": result.status}
        args["turns"] = result.turns
        if result.error is not None:
            args["error"] = result.error.message[:200]
        self._emit(
            {
                "name": f"agent {result.index} {result.status}",
                "ph": "i",
                "s": "p",
                "ts": ts,
                "pid": BATCH_PID,
                "tid": 1,
                "args": args,
            }
        )
        self._counter("agents running", now, running=self._running)
        self._counter("results", now, **self._done)

    # -------------------------------------------------------------------- model requests

    def queued(self, call: CallModel, run: int | None, now: float) -> None:
        self._waiting += 1
        self._counter("slots", now, in_use=self._in_use, waiting=self._waiting)

    def attempt_started(
        self, call: CallModel, run: int | None, attempt: int, wait: float, now: float
    ) -> Any:
        self._waiting -= 1
        self._in_use += 1
        used = self._slots.used
        lane = self._slots.take()
        self._thread_name(SLOTS_PID, lane, used, "slot")
        self._counter("slots", now, in_use=self._in_use, waiting=self._waiting)
        return (lane, call, run, attempt, wait, now)

    def attempt_ended(self, token: Any, exchange: Exchange | None, now: float) -> None:
        lane, call, run, attempt, wait, started = token
        self._slots.give(lane)
        self._in_use -= 1
        from .._core.events import ModelFailed  # noqa: PLC0415 - keeps import time low

        who = "warm-up" if run is None else f"agent {run}"
        name = f"{who} · turn {call.hints.turn + 1}"
        args: dict[str, Any] = {
            "agent": run,
            "request": call.request_id,
            "attempt": attempt,
            "slot_wait_ms": round(wait * 1e3, 3),
        }
        event: dict[str, Any] = {
            "ph": "X",
            "ts": self._us(started),
            "dur": round((now - started) * 1e6, 1),
            "pid": SLOTS_PID,
            "tid": lane,
            "args": args,
        }
        if exchange is None:
            event["name"] = f"{name} (cancelled)"
            event["cname"] = "grey"
        elif isinstance(exchange.event, ModelFailed):
            error = exchange.event.error
            event["name"] = f"{who} · {error.kind.value}"
            event["cname"] = "terrible"
            args["error"] = error.message[:200]
            args["status"] = error.status
        else:
            event["name"] = name if attempt == 1 else f"{name} · attempt {attempt}"
            usage = exchange.event.usage
            args["prompt_tokens"] = usage.prompt_tokens
            args["cached_tokens"] = usage.cached_tokens
            args["completion_tokens"] = usage.completion_tokens
            if exchange.ttft is not None:
                args["ttft_ms"] = round(exchange.ttft * 1e3, 3)
        self._emit(event)
        if exchange is not None and exchange.ttft is not None:
            first = started + exchange.ttft
            self._emit(
                {
                    "name": "streaming",
                    "ph": "X",
                    "ts": self._us(first),
                    "dur": round((now - first) * 1e6, 1),
                    "pid": SLOTS_PID,
                    "tid": lane,
                }
            )
        self._counter("slots", now, in_use=self._in_use, waiting=self._waiting)

    def backoff(
        self, call: CallModel, run: int | None, error: ModelError, wait: float, now: float
    ) -> None:
        # Back-offs are announced with their length, so the slice is written at once; its
        # track is free again at its end (ends are not reported separately).
        used = self._backoffs.used
        lane = self._backoff_lane(now, wait)
        self._thread_name(BACKOFF_PID, lane, used, "back-off")
        who = "warm-up" if run is None else f"agent {run}"
        self._emit(
            {
                "name": f"{who} · back-off after {error.kind.value}",
                "ph": "X",
                "ts": self._us(now),
                "dur": round(wait * 1e6, 1),
                "pid": BACKOFF_PID,
                "tid": lane,
                "cname": "bad",
                "args": {"agent": run, "request": call.request_id, "wait_ms": round(wait * 1e3)},
            }
        )

    def _backoff_lane(self, now: float, wait: float) -> int:
        # Lanes whose last back-off ended before ``now`` are free; the ends are kept in a heap
        # (bounded by the back-offs in flight at once).
        ends = self._backoff_ends
        while ends and ends[0][0] <= now:
            _, lane = heapq.heappop(ends)
            self._backoffs.give(lane)
        lane = self._backoffs.take()
        heapq.heappush(ends, (now + wait, lane))
        return lane

    def request_ended(
        self, call: CallModel, event: ModelResponded | ModelFailed, now: float
    ) -> None:
        pass  # the attempts tell it all

    # -------------------------------------------------------------------- tools

    def tool_started(self, name: str, now: float) -> Any:
        used = self._tools.used
        lane = self._tools.take()
        self._thread_name(TOOLS_PID, lane, used, "tools")
        return [lane, name, now, 1]

    def tool_joined(self, token: Any, now: float) -> None:
        if token is not None:
            token[3] += 1

    def tool_ended(self, token: Any, error: ToolError | None, waiters: int, now: float) -> None:
        lane, name, started, _ = token
        self._tools.give(lane)
        event: dict[str, Any] = {
            "name": name if waiters <= 1 else f"{name} ({waiters} calls)",
            "ph": "X",
            "ts": self._us(started),
            "dur": round((now - started) * 1e6, 1),
            "pid": TOOLS_PID,
            "tid": lane,
            "args": {"tool": name, "waiters": waiters},
        }
        if error is not None:
            event["cname"] = "terrible"
            event["args"]["error"] = f"{error.type}: {error.message}"[:200]
        self._emit(event)

    # -------------------------------------------------------------------- end

    def close(self) -> None:
        """Finish the file (idempotent)."""
        if self._file is None:
            return
        file, self._file = self._file, None
        last = {
            "name": "agentcore",
            "ph": "M",
            "pid": BATCH_PID,
            "args": {"slots_used": self._slots.used, "results": self._done},
        }
        try:
            file.write(orjson.dumps(last) + b"\n]\n")
            file.close()
        except OSError as exc:
            BATCH.warning("trace file %s: %s", self._path, exc)


def read_trace(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The events of a trace file, one at a time (a file cut short by a crash included).

    Reads the line-per-event layout :class:`TraceWriter` writes, and falls back to loading
    the whole document for traces written by other tools.
    """
    with Path(path).open("rb") as f:
        first = f.readline()
        if first.strip() != b"[":
            rest = first + f.read()
            data = orjson.loads(rest)
            yield from data["traceEvents"] if isinstance(data, dict) else data
            return
        for raw in f:
            line = raw.strip().rstrip(b",")
            if not line or line == b"]":
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                return  # a torn last line
