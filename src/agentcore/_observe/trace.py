"""A batch as Chrome trace-event JSON, written while it runs (open it in https://ui.perfetto.dev
or ``chrome://tracing``, or render it with ``agentcore trace``).

Theory of operation
-------------------
:class:`TraceWriter` is a step sink (:mod:`agentcore._observe.steps`): the driver hands it
every run's events and those of requests made outside runs. Each event turns into trace
events that go straight to the file, one JSON object per line inside a JSON array, so the
trace of a batch of any size costs memory only for what is in flight: the lanes in use, the
attempts holding a slot, the runs going on (their index, for the slice names). It uses
nothing but the public events: a sink of your own can write the same file.

Written as it goes: the opening ``[`` and the track names reach the file when the writer
opens, and what is buffered after that (64 KiB at most) reaches it whenever the trio loop is
about to wait with nothing to run (a trio instrument's ``before_io_wait``), so a process
killed at any moment leaves on disk every event up to its last idle moment: all of them
while the batch waits on the network or a Batch API, and the 64 KiB before it in a CPU-bound
stretch. The file is valid JSON once the writer is closed, which also writes a closing
``agentcore`` metadata event; a trace without it was cut short (a crash, a kill, or a batch
still running). Such a trace still loads in Perfetto (it accepts a missing ``]``), and
:func:`read_trace` reads any prefix of the file (a torn last line, an empty file).

Tracks (``pid``/``tid`` in the trace format):

- *inference slots* (pid 1): one track per slot. An attempt that holds a slot is a slice
  ``agent N · turn T`` (``attempt A`` when retried), with a nested ``streaming`` slice from
  the first token to the end when the reply was streamed (its start is the TTFT). A failed
  attempt is named after its error kind and coloured as an error. A slot's track number is
  the lowest one free when the attempt got the slot, so at most ``max_inflight`` tracks exist.
- *tool executions* (pid 2): one slice per execution (a ``ToolEnded`` whose ``source`` is
  ``"executed"``), named ``tool (W calls)`` when W calls shared it (coalesced waiters), on as
  many tracks as executions ran at once. A slice is written when it ends, on the lowest track
  free since its start. A call answered without an execution of its own (``source``
  ``"cached"`` or ``"coalesced"``) is an instant event on track 0 of the same process,
  ``tool (cached)`` / ``tool (shared)``, when it got its answer.
- *back-offs* (pid 3): a slice per back-off sleep between attempts (no slot held).
  An attempt still holding its slot when its run ends was cancelled: it is drawn grey.
- *tool cap waits* (pid 5): a slice per wait of a tool call for a concurrency cap (its
  turn's, its batch's or its tool's; no slot held), from a ``ToolWaited``. An execution that
  waited for its tool's cap has its slice start when the wait ended.
- tool progress (pid 2): a process-wide instant event per ``ToolProgress`` (``tool 40%``, the
  message in its arguments).
- *Batch API hops* (pid 6): on a ``openai-batch://`` or ``anthropic-batch://`` backend, one
  slice per hop from its submission to its end (``hop N · BATCH_ID (R requests)``, its
  status and what ended it in the arguments), on the lowest track free when it was submitted;
  each poll an instant event on the hop's track (``poll: in_progress (37/100)``).
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
import trio

from .log import BATCH
from .steps import (
    HopChanged,
    ModelReplied,
    RequestFailed,
    RequestQueued,
    RequestStarted,
    RetryScheduled,
    RunAborted,
    RunFinished,
    RunStarted,
    ToolEnded,
    ToolProgress,
    ToolWaited,
)

if TYPE_CHECKING:
    from .steps import StepEvent

__all__ = ["HOPS_PID", "SLOTS_PID", "TOOL_WAITS_PID", "TraceWriter", "read_trace"]

SLOTS_PID, TOOLS_PID, BACKOFF_PID, BATCH_PID, TOOL_WAITS_PID, HOPS_PID = 1, 2, 3, 4, 5, 6
_PROCESS_NAMES = {
    SLOTS_PID: "inference slots",
    TOOLS_PID: "tool executions",
    BACKOFF_PID: "back-offs (no slot held)",
    BATCH_PID: "batch",
    TOOL_WAITS_PID: "tool cap waits (no slot held)",
    HOPS_PID: "Batch API hops",
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
        self._dirty = False
        """Whether events were written since the last flush."""
        self._origin = now
        self._slots = _Lanes()
        self._tools = _Lanes()
        self._backoffs = _Lanes()
        self._backoff_ends: list[tuple[float, int]] = []
        self._tool_ends: list[tuple[float, int]] = []
        self._waits = _Lanes()
        self._wait_ends: list[tuple[float, int]] = []
        self._hop_lanes = _Lanes()
        self._hops: dict[int, tuple[float, int]] = {}
        """The hops in flight: when each was submitted (or first seen), and its track."""
        self._capped: dict[tuple[int, str], float] = {}
        """When each call in progress got through its tool's cap (calls that waited only)."""
        self._answered_named = False
        self._attempts: dict[tuple[int | None, str], tuple[RequestStarted, int]] = {}
        """The attempts holding a slot, with their track."""
        self._index: dict[int, int] = {}
        """The index of each run going on, by run id."""
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
        self.flush()
        self._flusher = _FlushWhenIdle(self)
        trio.lowlevel.add_instrument(self._flusher)

    # -------------------------------------------------------------------- Batch API hops

    def _hop(self, event: HopChanged) -> None:
        """A hop's slice from its submission to its end on a track of its own, and each poll
        as an instant on it."""
        found = self._hops.get(event.hop)
        if found is None:
            used = self._hop_lanes.used
            lane = self._hop_lanes.take()
            self._thread_name(HOPS_PID, lane, used, "hops")
            found = self._hops[event.hop] = event.at, lane
        since, lane = found
        label = f"hop {event.hop}" + (f" · {event.batch_id}" if event.batch_id else "")
        if event.polled:
            self._emit({"name": f"poll: {event.status} ({event.done}/{event.requests})",
                        "ph": "i", "s": "t", "ts": self._us(event.at), "pid": HOPS_PID,
                        "tid": lane, "args": {"hop": event.hop}})  # fmt: skip
            return
        if event.status in ("gathering", "submitting", "submitted", "resumed") or (
            not event.note or event.note.startswith("submitted")
        ):
            return  # not over: a poll or an end comes next
        del self._hops[event.hop]
        self._hop_lanes.give(lane)
        self._emit(
            {
                "name": f"{label} ({event.requests} requests)",
                "ph": "X",
                "ts": self._us(since),
                "dur": round((event.at - since) * 1e6, 1),
                "pid": HOPS_PID,
                "tid": lane,
                "args": {"status": event.status, "note": event.note, "done": event.done},
            }
        )

    # -------------------------------------------------------------------- plumbing

    def _us(self, t: float) -> float:
        return round((t - self._origin) * 1e6, 1)

    def _emit(self, event: dict[str, Any]) -> None:
        if self._file is not None:
            try:
                self._file.write(orjson.dumps(event) + b",\n")
            except OSError as exc:
                self._stop(exc)
            else:
                self._dirty = True

    def _stop(self, exc: OSError) -> None:
        # A full disk must not take the batch down: stop tracing, say so once.
        BATCH.warning("trace file %s: %s; tracing stopped", self._path, exc)
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def flush(self) -> None:
        """Hand what is buffered to the operating system (it survives a kill from then on)."""
        if self._file is not None:
            self._dirty = False
            try:
                self._file.flush()
            except OSError as exc:
                self._stop(exc)

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

    # -------------------------------------------------------------------- the sink

    deltas = False

    def push(self, event: StepEvent) -> None:
        """Write what ``event`` shows (a step sink's ``push``)."""
        kind = type(event)
        if kind is RequestStarted:
            self._attempt_started(event)  # type: ignore[arg-type]
        elif kind is RequestQueued:
            self._waiting += 1
            self._counter("slots", event.at, in_use=self._in_use, waiting=self._waiting)  # type: ignore[union-attr]
        elif kind is ModelReplied or kind is RequestFailed:
            self._attempt_ended(event)  # type: ignore[arg-type]
        elif kind is RetryScheduled:
            self._attempt_ended(event)  # type: ignore[arg-type]
            self._backoff(event)  # type: ignore[arg-type]
        elif kind is ToolEnded:
            self._tool_ended(event)  # type: ignore[arg-type]
        elif kind is ToolWaited:
            self._tool_waited(event)  # type: ignore[arg-type]
        elif kind is ToolProgress:
            self._tool_progress(event)  # type: ignore[arg-type]
        elif kind is RunStarted:
            assert isinstance(event, RunStarted)
            self._index[event.run] = event.index
            self._running += 1
            self._counter("agents running", event.at, running=self._running)
        elif kind is RunFinished or kind is RunAborted:
            self._run_ended(event)  # type: ignore[arg-type]
        elif kind is HopChanged:
            self._hop(event)  # type: ignore[arg-type]

    async def settle(self) -> None:
        """Never waits: the file is written as events come."""

    def _who(self, run: int | None) -> str:
        return "warm-up" if run is None else f"agent {self._index.get(run, run)}"

    # -------------------------------------------------------------------- runs

    def _run_ended(self, event: RunFinished | RunAborted) -> None:
        run, now = event.run, event.at
        for key in [k for k in self._attempts if k[0] == run]:
            self._close_attempt(key, None, now)  # still holding its slot: cancelled
        index = self._index.pop(run, run)
        self._running -= 1
        status = event.status
        self._done[status] += 1
        args: dict[str, Any] = {"agent": index, "run": run, "status": status}
        args["turns"] = event.turns
        if isinstance(event, RunAborted):
            args["error"] = event.reason.message[:200]
        self._emit(
            {
                "name": f"agent {index} {status}",
                "ph": "i",
                "s": "p",
                "ts": self._us(now),
                "pid": BATCH_PID,
                "tid": 1,
                "args": args,
            }
        )
        self._counter("agents running", now, running=self._running)
        self._counter("results", now, **self._done)

    # -------------------------------------------------------------------- model requests

    def _attempt_started(self, event: RequestStarted) -> None:
        self._waiting -= 1
        self._in_use += 1
        used = self._slots.used
        lane = self._slots.take()
        self._thread_name(SLOTS_PID, lane, used, "slot")
        self._counter("slots", event.at, in_use=self._in_use, waiting=self._waiting)
        self._attempts[event.run, event.request_id] = event, lane

    def _attempt_ended(self, event: ModelReplied | RetryScheduled | RequestFailed) -> None:
        key = (event.run, event.request_id)
        if key in self._attempts:
            self._close_attempt(key, event, event.at)

    def _close_attempt(
        self,
        key: tuple[int | None, str],
        end: ModelReplied | RetryScheduled | RequestFailed | None,
        now: float,
    ) -> None:
        started, lane = self._attempts.pop(key)
        self._slots.give(lane)
        self._in_use -= 1
        who = self._who(started.run)
        name = f"{who} · turn {started.turn + 1}"
        attempt = started.attempt
        args: dict[str, Any] = {
            "agent": None if started.run is None else self._index.get(started.run),
            "run": started.run,
            "request": started.request_id,
            "attempt": attempt,
            "slot_wait_ms": round(started.slot_wait * 1e3, 3),
        }
        event: dict[str, Any] = {
            "ph": "X",
            "ts": self._us(started.at),
            "dur": round((now - started.at) * 1e6, 1),
            "pid": SLOTS_PID,
            "tid": lane,
            "args": args,
        }
        ttft = None
        if end is None:
            event["name"] = f"{name} (cancelled)"
            event["cname"] = "grey"
        elif isinstance(end, ModelReplied):
            event["name"] = name if attempt == 1 else f"{name} · attempt {attempt}"
            usage = end.usage
            args["prompt_tokens"] = usage.prompt_tokens
            args["cached_tokens"] = usage.cached_tokens
            if usage.cached_tokens is not None and usage.prompt_tokens:
                # The turn's cache-hit ratio (the slice's name carries the turn).
                args["cache_hit"] = round(usage.cached_tokens / usage.prompt_tokens, 4)
            args["completion_tokens"] = usage.completion_tokens
            ttft = end.ttft
            if ttft is not None:
                args["ttft_ms"] = round(ttft * 1e3, 3)
        else:
            error = end.error
            event["name"] = f"{who} · {error.kind.value}"
            event["cname"] = "terrible"
            args["error"] = error.message[:200]
            args["status"] = error.status
        self._emit(event)
        if ttft is not None:
            first = started.at + ttft
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

    def _backoff(self, event: RetryScheduled) -> None:
        # Back-offs are announced with their length, so the slice is written at once.
        now, wait = event.at, event.delay
        used = self._backoffs.used
        lane = self._free_lane(self._backoffs, self._backoff_ends, now, now + wait)
        self._thread_name(BACKOFF_PID, lane, used, "back-off")
        self._emit(
            {
                "name": f"{self._who(event.run)} · back-off after {event.error.kind.value}",
                "ph": "X",
                "ts": self._us(now),
                "dur": round(wait * 1e6, 1),
                "pid": BACKOFF_PID,
                "tid": lane,
                "cname": "bad",
                "args": {
                    "agent": None if event.run is None else self._index.get(event.run),
                    "run": event.run,
                    "request": event.request_id,
                    "wait_ms": round(wait * 1e3),
                },
            }
        )

    @staticmethod
    def _free_lane(lanes: _Lanes, ends: list[tuple[float, int]], start: float, end: float) -> int:
        # Lanes whose last slice ended by ``start`` are free; the ends are kept in a heap
        # (bounded by the slices that overlap at once).
        while ends and ends[0][0] <= start:
            _, lane = heapq.heappop(ends)
            lanes.give(lane)
        lane = lanes.take()
        heapq.heappush(ends, (end, lane))
        return lane

    # -------------------------------------------------------------------- tools

    def _tool_ended(self, event: ToolEnded) -> None:
        capped = self._capped.pop((event.run, event.call_id), None) if self._capped else None
        if event.source != "executed":
            # A call answered by the cache or a shared execution: an instant, not a slice.
            if not self._answered_named:
                self._answered_named = True
                self._emit(
                    {
                        "name": "thread_name",
                        "ph": "M",
                        "pid": TOOLS_PID,
                        "tid": 0,
                        "args": {"name": "answered without an execution"},
                    }
                )
            label = "cached" if event.source == "cached" else "shared"
            self._emit(
                {
                    "name": f"{event.tool} ({label})",
                    "ph": "i",
                    "s": "t",
                    "ts": self._us(event.at),
                    "pid": TOOLS_PID,
                    "tid": 0,
                    "args": {"tool": event.tool, "source": event.source, "run": event.run},
                }
            )
            return
        started = event.at - event.duration
        if capped is not None:
            started = max(started, capped)  # its wait for the tool's cap has a slice of its own
        used = self._tools.used
        lane = self._free_lane(self._tools, self._tool_ends, started, event.at)
        self._thread_name(TOOLS_PID, lane, used, "tools")
        name, waiters = event.tool, event.calls
        slice_: dict[str, Any] = {
            "name": name if waiters <= 1 else f"{name} ({waiters} calls)",
            "ph": "X",
            "ts": self._us(started),
            "dur": round((event.at - started) * 1e6, 1),
            "pid": TOOLS_PID,
            "tid": lane,
            "args": {"tool": name, "waiters": waiters},
        }
        if event.error is not None:
            slice_["cname"] = "terrible"
            slice_["args"]["error"] = f"{event.error.type}: {event.error.message}"[:200]
        self._emit(slice_)

    def _tool_waited(self, event: ToolWaited) -> None:
        if event.cap == "tool":
            self._capped[event.run, event.call_id] = event.at
        used = self._waits.used
        lane = self._free_lane(self._waits, self._wait_ends, event.since, event.at)
        self._thread_name(TOOL_WAITS_PID, lane, used, "waits")
        self._emit(
            {
                "name": f"{self._who(event.run)} · {event.tool} waits ({event.cap} cap)",
                "ph": "X",
                "ts": self._us(event.since),
                "dur": round(event.wait * 1e6, 1),
                "pid": TOOL_WAITS_PID,
                "tid": lane,
                "cname": "yellow",
                "args": {
                    "agent": self._index.get(event.run),
                    "run": event.run,
                    "tool": event.tool,
                    "call": event.call_id,
                    "cap": event.cap,
                    "wait_ms": round(event.wait * 1e3, 3),
                },
            }
        )

    def _tool_progress(self, event: ToolProgress) -> None:
        self._emit(
            {
                "name": f"{event.tool} {100 * event.fraction:.0f}%",
                "ph": "i",
                "s": "p",
                "ts": self._us(event.at),
                "pid": TOOLS_PID,
                "args": {
                    "agent": self._index.get(event.run),
                    "run": event.run,
                    "call": event.call_id,
                    "fraction": event.fraction,
                    "message": event.message[:200],
                },
            }
        )

    # -------------------------------------------------------------------- end

    def close(self) -> None:
        """Finish the file (idempotent); attempts still open are drawn as cancelled."""
        with contextlib.suppress(KeyError, RuntimeError):  # removed once, inside trio
            trio.lowlevel.remove_instrument(self._flusher)
        if self._file is None:
            return
        for key, (started, _) in list(self._attempts.items()):
            self._close_attempt(key, None, max(started.at, trio.current_time()))
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


class _FlushWhenIdle(trio.abc.Instrument):
    """Flushes a trace writer whenever the trio loop is about to wait for something with
    nothing to run (and the writer has unflushed events)."""

    def __init__(self, writer: TraceWriter) -> None:
        self._writer = writer

    def before_io_wait(self, timeout: float) -> None:
        if timeout > 0 and self._writer._dirty:
            self._writer.flush()


def read_trace(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The events of a trace file, one at a time (a file cut short by a crash included: any
    prefix of what :class:`TraceWriter` writes, an empty file among them).

    Reads the line-per-event layout :class:`TraceWriter` writes, and falls back to loading
    the whole document for traces written by other tools.
    """
    with Path(path).open("rb") as f:
        first = f.readline().strip()
        if first not in (b"", b"["):  # not this writer's layout, nor an empty file
            data = orjson.loads(first + f.read())
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
