"""A trace file (:mod:`._observe.trace`) as a self-contained picture: SVG, or HTML around it.

Two passes over the file, each streaming (:func:`~._observe.trace.read_trace`): the first finds
the time span and the track counts, the second draws. What is kept is bounded by the picture,
not by the batch: slices narrower than three pixels that touch on one track are merged into one
shape (drawn with the count in its tooltip), and utilisation and queue length are kept in a
fixed number of time bins.

From top to bottom: a summary line; one row per inference slot (each attempt coloured by its
agent, a dark tick at the first token of a streamed reply, errors in red, cancelled attempts
grey); on a Batch API backend, its hops (one slice per hop, submitted to ended, a tick per
poll); slot utilisation over time (share of slots busy, filled) with the number of requests
waiting for a slot (line); tool executions (label ``tool (W calls)`` when shared); the tool
calls answered without an execution of their own, from the cache or by joining a shared
execution (stacked bars per time bin, from the trace's instant events); back-offs; the waits
of tool calls for a concurrency cap (only when some call waited). The summary
line counts every tool call: executions, calls that shared one, calls from the cache.
Hovering a shape in a browser shows its details (SVG ``<title>``). A trace without the
writer's closing record was cut short (a kill, a crash, a batch still running): a red line
under the summary says so, where (the last time in the file) and what was going on then (the
last counters: agents running, requests holding or waiting for a slot), and a dashed line
marks the cut.

The second pass is a :class:`_Tally` (what the bands need, bounded by the picture); a
:class:`_Canvas` then draws the bands one method each, top to bottom.
"""

from __future__ import annotations

import colorsys
import math
import os
from html import escape
from pathlib import Path
from typing import Any

from .._core.errors import ConfigError
from .trace import (
    BACKOFF_PID,
    BATCH_PID,
    HOPS_PID,
    SLOTS_PID,
    TOOL_WAITS_PID,
    TOOLS_PID,
    read_trace,
)

__all__ = ["render_timeline"]

_WIDTH = 1400
_LEFT = 120
_RIGHT = 20
_BINS = 400
_SLOT_H = 16
_SMALL_H = 13
_CHART_H = 90
_ANSWERED_H = 40
_CACHED = "#59a14f"
_SHARED = "#76b7b2"
_ERROR = "#d62728"
_MERGED = "#8da0b8"
_CAP_WAIT = "#e7ba52"
_FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


class _Row:
    """One track's shapes, merging runs of slices narrower than three pixels (drawn in
    :data:`_MERGED`, or red if one of them was an error)."""

    def __init__(self) -> None:
        self.shapes: list[tuple[float, float, str, str, int]] = []
        self._pending: list[Any] | None = None

    def add(self, x0: float, x1: float, fill: str, tip: str) -> None:
        pending = self._pending
        narrow = x1 - x0 < 3.0
        if pending is not None and x0 <= pending[1] + 0.5 and (narrow or pending[4] > 1):
            pending[1] = max(pending[1], x1)
            pending[4] += 1
            if pending[2] != fill and fill == _ERROR:
                pending[2] = fill  # errors stay visible in a merged shape
            return
        self.flush()
        self._pending = [x0, x1, fill, tip, 1] if narrow else None
        if not narrow:
            self.shapes.append((x0, x1, fill, tip, 1))

    def flush(self) -> None:
        if self._pending is not None:
            x0, x1, fill, tip, count = self._pending
            if count > 1 and fill != _ERROR:
                fill = _MERGED
            self.shapes.append((x0, max(x1, x0 + 1.0), fill, tip, count))
            self._pending = None


def _agent_colour(agent: Any) -> str:
    if not isinstance(agent, int):
        return "#8c8c8c"
    red, green, blue = colorsys.hls_to_rgb((agent * 0.381966) % 1.0, 0.68, 0.55)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


def _tick_step(span_s: float) -> float:
    raw = span_s / 10
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for factor in (1, 2, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _scan(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The first pass: the time span, the tracks per process, whether the writer closed the
    trace (its ``agentcore`` metadata event), and the last counters (what was going on where
    a trace without that event was cut)."""
    end = 0.0
    lanes = {SLOTS_PID: 0, TOOLS_PID: 0, BACKOFF_PID: 0, TOOL_WAITS_PID: 0, HOPS_PID: 0}
    closed = False
    last: dict[str, int] = {"running": 0, "in_use": 0, "waiting": 0}
    for event in read_trace(path):
        ts = event.get("ts")
        if isinstance(ts, int | float):
            end = max(end, ts + float(event.get("dur", 0.0)))
        ph, pid, tid = event.get("ph"), event.get("pid"), event.get("tid")
        if ph == "X" and pid in lanes and isinstance(tid, int):
            lanes[pid] = max(lanes[pid], tid)
        elif pid == BATCH_PID and ph == "C" and event.get("name") in ("slots", "agents running"):
            last.update((k, int(v)) for k, v in event.get("args", {}).items() if k in last)
        elif pid == BATCH_PID and ph == "M" and event.get("name") == "agentcore":
            closed = True
    return {"end_us": max(end, 1.0), "lanes": lanes, "cut": None if closed else last}


class _Tally:
    """What the second pass over a trace keeps: one :class:`_Row` per track, slot time and
    queue length per time bin, stream ticks and counts. Bounded by the picture, not the
    batch."""

    def __init__(self, scan: dict[str, Any]) -> None:
        self.end_us: float = scan["end_us"]
        self.lanes: dict[int, int] = scan["lanes"]
        self.plot_w = _WIDTH - _LEFT - _RIGHT
        self.scale: float = self.plot_w / self.end_us
        self.bin_us = self.end_us / _BINS
        self.rows = {pid: [_Row() for _ in range(n)] for pid, n in self.lanes.items()}
        self.busy = [0.0] * _BINS
        self.waiting = [-1] * _BINS  # -1: no sample in the bin (the previous value holds)
        self.ticks: list[tuple[float, int]] = []
        self.attempts = self.failed = self.cancelled_attempts = 0
        self.executions = self.shared_calls = self.backoffs = self.cap_waits = 0
        self.cached_bins = [0] * _BINS  # calls answered from the cache, per time bin
        self.shared_bins = [0] * _BINS  # calls that joined a shared execution, per time bin
        self.results: dict[str, int] = {}
        self.polls: list[tuple[float, int, str]] = []  # a Batch API hop's polls: x, track, what
        self.hops = 0
        self.slot_busy_us = 0.0
        self.cut: dict[str, int] | None = scan["cut"]
        """What was going on at the end of a trace cut short (``None``: it was closed)."""

    def x(self, us: float) -> float:
        return _LEFT + us * self.scale

    def _bin(self, ts: float) -> int:
        return min(_BINS - 1, int(ts / self.bin_us))

    def add(self, event: dict[str, Any]) -> None:
        """Count or place one trace event."""
        ph, pid = event.get("ph"), event.get("pid")
        if ph == "C" and pid == BATCH_PID:
            self._counter(event)
        elif ph == "i" and pid == TOOLS_PID:
            self._answered(event)
        elif ph == "i" and pid == HOPS_PID:
            if len(self.polls) < 50_000:
                where = self.x(float(event["ts"]))
                self.polls.append((where, int(event["tid"]), str(event.get("name"))))
        elif ph == "X" and pid in self.rows:
            self._slice(event, pid)

    def _counter(self, event: dict[str, Any]) -> None:
        args = event.get("args", {})
        if event.get("name") == "slots":
            b = self._bin(event["ts"])
            self.waiting[b] = max(self.waiting[b], int(args.get("waiting", 0)))
        elif event.get("name") == "results":
            self.results = {k: int(v) for k, v in args.items()}

    def _answered(self, event: dict[str, Any]) -> None:
        b = self._bin(float(event["ts"]))
        source = event.get("args", {}).get("source")
        if source == "cached":
            self.cached_bins[b] += 1
        elif source == "coalesced":
            self.shared_bins[b] += 1

    def _slice(self, event: dict[str, Any], pid: Any) -> None:
        ts, dur = float(event["ts"]), float(event.get("dur", 0.0))
        row = self.rows[pid][int(event["tid"]) - 1]
        args = event.get("args", {})
        name = str(event.get("name", ""))
        x0, x1 = self.x(ts), self.x(ts + dur)
        if pid == SLOTS_PID:
            if name != "streaming":
                self._attempt(event, row)
        elif pid == TOOLS_PID:
            self.executions += 1
            self.shared_calls += max(0, int(args.get("waiters", 1)) - 1)
            fill = "#d62728" if event.get("cname") == "terrible" else "#4c78a8"
            tip = f"{name}: {dur / 1e3:.1f} ms" + (f" — {args['error']}" if "error" in args else "")
            row.add(x0, x1, fill, tip)
        elif pid == HOPS_PID:
            self.hops += 1
            status = str(args.get("status", ""))
            fill = "#d62728" if status in ("dead", "refused", "failed") else "#9467bd"
            if status in ("split", "cancelled", "expired"):
                fill = "#bdbdbd"
            row.add(x0, x1, fill, f"{name}: {dur / 1e6:.1f} s, {status} — {args.get('note', '')}")
        elif pid == BACKOFF_PID:
            self.backoffs += 1
            row.add(x0, x1, "#f2a541", f"{name}: {dur / 1e3:.0f} ms")
        else:
            self.cap_waits += 1
            row.add(x0, x1, _CAP_WAIT, f"{name}: {dur / 1e3:.0f} ms")

    def _attempt(self, event: dict[str, Any], row: _Row) -> None:
        ts, dur = float(event["ts"]), float(event.get("dur", 0.0))
        args = event.get("args", {})
        name = str(event.get("name", ""))
        self.attempts += 1
        self.slot_busy_us += dur
        bin_us = self.bin_us
        for b in range(int(ts / bin_us), min(_BINS - 1, int((ts + dur) / bin_us)) + 1):
            lo, hi = max(ts, b * bin_us), min(ts + dur, (b + 1) * bin_us)
            self.busy[b] += max(0.0, hi - lo)
        cname = event.get("cname")
        if cname == "terrible":
            self.failed += 1
            fill = "#d62728"
        elif cname == "grey":
            self.cancelled_attempts += 1
            fill = "#bdbdbd"
        else:
            fill = _agent_colour(args.get("agent"))
        tip = f"{name}: {dur / 1e3:.1f} ms"
        if "ttft_ms" in args:
            tip += f", first token after {args['ttft_ms']:.1f} ms"
            if dur * self.scale >= 4 and len(self.ticks) < 50_000:
                self.ticks.append((self.x(ts + args["ttft_ms"] * 1e3), int(event["tid"])))
        if args.get("slot_wait_ms"):
            tip += f", waited {args['slot_wait_ms']:.0f} ms for the slot"
        if "error" in args:
            tip += f" — {args['error']}"
        row.add(self.x(ts), self.x(ts + dur), fill, tip)

    def finish(self) -> None:
        """Close the merged shapes and carry each queue sample into the empty bins after it."""
        for pid_rows in self.rows.values():
            for r in pid_rows:
                r.flush()
        held = 0
        for b in range(_BINS):
            held = self.waiting[b] = held if self.waiting[b] < 0 else self.waiting[b]

    @property
    def joined(self) -> int:
        """Calls that shared an execution (from the instants; from the executions' waiter
        counts for a trace without them, written by an older agentcore)."""
        return sum(self.shared_bins) or self.shared_calls

    def summary(self) -> str:
        n_slots = self.lanes[SLOTS_PID]
        util = self.slot_busy_us / (n_slots * self.end_us) if n_slots else 0.0
        results = self.results
        done = ", ".join(f"{v} {k}" for k, v in results.items() if v) or "no agent finished"
        cached, joined, executions = sum(self.cached_bins), self.joined, self.executions
        hops = f"{self.hops} Batch API hops, {len(self.polls)} polls · " if self.hops else ""
        return (
            f"{sum(results.values())} agents ({done}) · {self.end_us / 1e6:.2f} s · {hops}"
            f"{self.attempts} model attempts on {n_slots} slots ({self.failed} failed) · "
            f"slot utilisation {100 * util:.0f}% · {executions + joined + cached} tool calls: "
            f"{executions} executions, {joined} shared one, {cached} from the cache · "
            f"{self.backoffs} back-offs"
        )

    def cut_notice(self) -> str | None:
        """For a trace cut short: that it was, where, and what was going on then."""
        if self.cut is None:
            return None
        return (
            f"CUT SHORT at {self.end_us / 1e6:.2f} s: the trace has no closing record (the "
            f"process was killed, or the batch is still running). At the cut "
            f"{self.cut['running']} agents were running, {self.cut['in_use']} model requests "
            f"held a slot (not drawn: they had not ended) and {self.cut['waiting']} waited "
            "for one."
        )


class _Canvas:
    """The SVG elements of the picture, drawn top to bottom (``y``: the next free line)."""

    def __init__(self, tally: _Tally) -> None:
        self.tally = tally
        self.out: list[str] = []
        self.y = 66.0

    def label(self, text: str, yy: float, size: int = 11, weight: str = "normal") -> None:
        self.out.append(
            f"<text x='{_LEFT - 8}' y='{yy:.1f}' text-anchor='end' font-size='{size}' "
            f"font-weight='{weight}' {_FONT}>{escape(text)}</text>"
        )

    def section(self, title: str, yy: float) -> None:
        self.out.append(
            f"<text x='8' y='{yy:.1f}' font-size='12' font-weight='bold' {_FONT}>"
            f"{escape(title)}</text>"
        )

    def shapes(self, pid_rows: list[_Row], top: float, height: float, text: bool) -> float:
        """One band per row, its shapes on it (named when wide enough); returns the bottom."""
        out, plot_w = self.out, self.tally.plot_w
        for i, r in enumerate(pid_rows):
            yy = top + i * (height + 2)
            out.append(
                f"<rect x='{_LEFT}' y='{yy:.1f}' width='{plot_w}' height='{height}' "
                "fill='#f4f4f4'/>"
            )
            for x0, x1, fill, tip, count in r.shapes:
                more = f" (and {count - 1} more)" if count > 1 else ""
                out.append(
                    f"<rect x='{x0:.2f}' y='{yy:.1f}' width='{max(x1 - x0, 0.6):.2f}' "
                    f"height='{height}' fill='{fill}' stroke='white' stroke-width='0.4'>"
                    f"<title>{escape(tip + more)}</title></rect>"
                )
                short = tip.split(":", 1)[0].replace("agent ", "a").split(" · ")[0]
                if " calls)" in short and x1 - x0 <= 5.5 * len(short) + 4:
                    short = short[short.index("(") + 1 : -1]  # "3 calls" for a shared execution
                if text and count == 1 and x1 - x0 > 5.5 * len(short) + 4:
                    out.append(
                        f"<text x='{x0 + 2:.1f}' y='{yy + height - 4:.1f}' font-size='9' "
                        f"fill='#222' {_FONT}>{escape(short)}</text>"
                    )
        return top + len(pid_rows) * (height + 2)

    # ---------------------------------------------------------------- the bands

    def slots(self) -> float:
        """The inference slots, one row each, with stream ticks; returns the top of the
        first row (where the time axis's lines start)."""
        tally = self.tally
        self.section("inference slots", self.y - 6)
        slot_top = self.y
        self.y = self.shapes(tally.rows[SLOTS_PID], self.y, _SLOT_H, True)
        for i in range(tally.lanes[SLOTS_PID]):
            self.label(f"slot {i + 1}", slot_top + i * (_SLOT_H + 2) + _SLOT_H - 4, 10)
        for tx, tid in tally.ticks:
            yy = slot_top + (tid - 1) * (_SLOT_H + 2)
            self.out.append(
                f"<line x1='{tx:.2f}' x2='{tx:.2f}' y1='{yy + 2:.1f}' "
                f"y2='{yy + _SLOT_H - 2:.1f}' stroke='#222' stroke-width='1'/>"
            )
        return slot_top

    def hops(self) -> None:
        """A Batch API backend's hops, one row per track, a tick per poll (drawn only when
        the trace has hops)."""
        tally = self.tally
        if not tally.lanes[HOPS_PID]:
            return
        self.y += 22
        self.section("Batch API hops (submitted to ended; a tick per poll)", self.y - 8)
        hops_top = self.y
        self.y = self.shapes(tally.rows[HOPS_PID], self.y, _SLOT_H, True)
        for tx, tid, what in tally.polls:
            yy = hops_top + (tid - 1) * (_SLOT_H + 2)
            self.out.append(
                f"<line x1='{tx:.2f}' x2='{tx:.2f}' y1='{yy + 3:.1f}' "
                f"y2='{yy + _SLOT_H - 3:.1f}' stroke='#222' stroke-width='1'>"
                f"<title>{escape(what)}</title></line>"
            )

    def utilisation(self) -> None:
        """Slot utilisation per time bin (filled) and the queue for a slot (line)."""
        tally, out = self.tally, self.out
        plot_w, n_slots, waiting = tally.plot_w, tally.lanes[SLOTS_PID], tally.waiting
        self.y += 26
        self.section("slot utilisation and queue", self.y - 8)
        chart_top, chart_bottom = self.y, self.y + _CHART_H
        out.append(
            f"<rect x='{_LEFT}' y='{chart_top}' width='{plot_w}' height='{_CHART_H}' "
            "fill='#f4f4f4'/>"
        )
        points = [f"{_LEFT},{chart_bottom}"]
        for b in range(_BINS):
            share = tally.busy[b] / (tally.bin_us * n_slots) if n_slots else 0.0
            top = chart_bottom - min(1.0, share) * _CHART_H
            points.append(f"{_LEFT + b * plot_w / _BINS:.1f},{top:.1f}")
            points.append(f"{_LEFT + (b + 1) * plot_w / _BINS:.1f},{top:.1f}")
        points.append(f"{_LEFT + plot_w},{chart_bottom}")
        out.append(f"<polygon points='{' '.join(points)}' fill='#9ecae1' stroke='#3182bd'/>")
        peak = max(waiting) or 1
        line = [
            f"{_LEFT + (b + 0.5) * plot_w / _BINS:.1f},"
            f"{chart_bottom - waiting[b] / peak * _CHART_H:.1f}"
            for b in range(_BINS)
        ]
        out.append(
            f"<polyline points='{' '.join(line)}' fill='none' stroke='#e6550d' stroke-width='1.2'/>"
        )
        self.label("100% busy", chart_top + 9, 9)
        self.label("0", chart_bottom, 9)
        out.append(
            f"<text x='{_LEFT + plot_w - 4}' y='{chart_top + 11}' text-anchor='end' "
            f"font-size='10' fill='#e6550d' {_FONT}>waiting for a slot (peak {max(waiting)})"
            "</text>"
        )
        self.y = chart_bottom + 26

    def tools(self) -> None:
        """Tool executions, one row per track."""
        lanes = self.tally.lanes[TOOLS_PID]
        self.section("tool executions", self.y - 8)
        tools_top = self.y
        self.y = self.shapes(self.tally.rows[TOOLS_PID], self.y, _SMALL_H, True)
        if lanes:
            self.label(f"{lanes} at most at once", tools_top + _SMALL_H - 2, 9)
        else:
            self.label("none", tools_top + 4, 9)
            self.y += 8
        self.y += 22

    def answered(self) -> None:
        """Calls answered without an execution, stacked per time bin."""
        tally, out = self.tally, self.out
        self.section(
            "tool calls answered without an execution (from the cache, shared)", self.y - 8
        )
        answered_top, answered_bottom = self.y, self.y + _ANSWERED_H
        out.append(
            f"<rect x='{_LEFT}' y='{answered_top}' width='{tally.plot_w}' "
            f"height='{_ANSWERED_H}' fill='#f4f4f4'/>"
        )
        cached_bins, shared_bins, bin_us = tally.cached_bins, tally.shared_bins, tally.bin_us
        most = max((c + s for c, s in zip(cached_bins, shared_bins, strict=True)), default=0)
        bar_w = tally.plot_w / _BINS
        for b in range(_BINS):
            base = answered_bottom
            for count, fill, what in (
                (cached_bins[b], _CACHED, "from the cache"),
                (shared_bins[b], _SHARED, "shared an execution"),
            ):
                if not count:
                    continue
                h = max(1.0, count / most * _ANSWERED_H)
                t0 = b * bin_us / 1e6
                out.append(
                    f"<rect x='{_LEFT + b * bar_w:.2f}' y='{base - h:.1f}' "
                    f"width='{bar_w:.2f}' height='{h:.1f}' fill='{fill}'><title>{count} "
                    f"calls {what} ({t0:.2f}-{t0 + bin_us / 1e6:.2f} s)</title></rect>"
                )
                base -= h
        self.label(f"{sum(cached_bins)} cached", answered_top + 14, 9)
        self.label(f"{tally.joined} shared", answered_top + 28, 9)
        self.y = answered_bottom + 22

    def backoffs(self) -> None:
        """Back-off sleeps, one row per track."""
        self.section("back-offs (no slot held)", self.y - 8)
        backoff_top = self.y
        self.y = self.shapes(self.tally.rows[BACKOFF_PID], self.y, _SMALL_H, False)
        if not self.tally.lanes[BACKOFF_PID]:
            self.label("none", backoff_top + 4, 9)
            self.y += 8

    def cap_waits(self) -> None:
        """Waits for a tool cap, drawn only for batches whose tool calls waited for one."""
        if not self.tally.lanes[TOOL_WAITS_PID]:
            return
        self.y += 22
        self.section("tool calls waiting for a concurrency cap (no slot held)", self.y - 8)
        waits_top = self.y
        self.y = self.shapes(self.tally.rows[TOOL_WAITS_PID], self.y, _SMALL_H, False)
        self.label(f"{self.tally.cap_waits} waits", waits_top + _SMALL_H - 2, 9)

    def time_axis(self, slot_top: float) -> None:
        """Seconds along the bottom, with a faint line up through every band."""
        tally = self.tally
        self.y += 8
        step = _tick_step(tally.end_us / 1e6)
        t = 0.0
        while t * 1e6 <= tally.end_us + 1:
            tx = tally.x(t * 1e6)
            self.out.append(
                f"<line x1='{tx:.1f}' x2='{tx:.1f}' y1='{slot_top - 4}' y2='{self.y}' "
                "stroke='#000' stroke-opacity='0.12'/>"
            )
            self.out.append(
                f"<text x='{tx:.1f}' y='{self.y + 12}' text-anchor='middle' font-size='10' "
                f"{_FONT}>{t:g} s</text>"
            )
            t += step
        if self.tally.cut is not None:  # the right edge is where the trace was cut
            cx = _LEFT + self.tally.plot_w
            self.out.append(
                f"<line x1='{cx}' x2='{cx}' y1='{slot_top - 4}' y2='{self.y}' stroke='{_ERROR}' "
                "stroke-width='2' stroke-dasharray='6 3'/>"
                f"<text x='{cx - 4}' y='{slot_top - 8}' text-anchor='end' font-size='11' "
                f"font-weight='bold' fill='{_ERROR}' {_FONT}>cut</text>"
            )
        self.y += 30

    def legend(self) -> None:
        legend = [
            ("#4c78a8", "tool execution"),
            (_CACHED, "call from the cache"),
            (_SHARED, "call that shared an execution"),
            (_MERGED, "slices too short to draw apart"),
            ("#d62728", "failed attempt / tool error"),
            ("#bdbdbd", "cancelled"),
            ("#f2a541", "back-off"),
            *([(_CAP_WAIT, "wait for a tool cap")] if self.tally.lanes[TOOL_WAITS_PID] else []),
        ]
        lx = float(_LEFT)
        self.out.append(
            f"<text x='8' y='{self.y}' font-size='10' {_FONT}>attempts are coloured by agent; "
            "a dark tick marks a streamed reply's first token</text>"
        )
        self.y += 16
        for colour, text in legend:
            self.out.append(
                f"<rect x='{lx}' y='{self.y - 9}' width='12' height='10' fill='{colour}'/>"
            )
            self.out.append(
                f"<text x='{lx + 16}' y='{self.y}' font-size='10' {_FONT}>{escape(text)}</text>"
            )
            lx += 30 + 6.2 * len(text)

    def svg(self, summary: str, notice: str | None) -> str:
        """The whole picture: its title, ``summary`` and a cut trace's ``notice`` above the
        bands drawn so far."""
        height = self.y + 12
        head = (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{_WIDTH}' height='{height:.0f}' "
            f"viewBox='0 0 {_WIDTH} {height:.0f}'>"
            f"<rect width='100%' height='100%' fill='white'/>"
            f"<text x='8' y='18' font-size='14' font-weight='bold' {_FONT}>agentcore batch "
            f"timeline</text><text x='8' y='34' font-size='11' {_FONT}>{escape(summary)}</text>"
        )
        if notice is not None:
            head += (
                f"<text x='8' y='49' font-size='11' font-weight='bold' fill='{_ERROR}' "
                f"{_FONT}>{escape(notice)}</text>"
            )
        return head + "".join(self.out) + "</svg>\n"


def _draw(path: str | os.PathLike[str], scan: dict[str, Any]) -> str:
    """The picture of the trace at ``path``: the second pass (:class:`_Tally`), then the
    bands from top to bottom (:class:`_Canvas`)."""
    tally = _Tally(scan)
    for event in read_trace(path):
        tally.add(event)
    tally.finish()
    canvas = _Canvas(tally)
    slot_top = canvas.slots()
    canvas.hops()
    canvas.utilisation()
    canvas.tools()
    canvas.answered()
    canvas.backoffs()
    canvas.cap_waits()
    canvas.time_axis(slot_top)
    canvas.legend()
    return canvas.svg(tally.summary(), tally.cut_notice())


def _html(svg: str, title: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title>"
        "<style>body{margin:16px;background:#fff}svg{max-width:100%;height:auto}</style>"
        f"</head><body>{svg}</body></html>\n"
    )


def render_timeline(trace: str | os.PathLike[str], output: str | os.PathLike[str]) -> Path:
    """Draw a trace written by ``trace=`` / ``--trace`` as a self-contained picture.

    ::

        agentcore.render_timeline("trace.json", "timeline.svg")  # or "timeline.html"

    Args:
        trace: the trace file (one still being written, or cut short by a crash, works too:
            the picture says where it was cut).
        output: ``.svg``, or ``.html`` for a page holding the SVG; replaced.

    Returns:
        The output path.

    Raises:
        ConfigError: the trace is missing or not a trace agentcore wrote, or the output's
            suffix is neither ``.svg`` nor ``.html``.
    """
    source, out = Path(trace), Path(output)
    suffix = out.suffix.lower()
    if suffix not in (".svg", ".html", ".htm"):
        raise ConfigError(f"{out}: the timeline is written as .svg or .html")
    if not source.is_file():
        raise ConfigError(f"{source}: no such trace file")
    try:
        svg = _draw(source, _scan(source))
    except (ValueError, KeyError, TypeError, IndexError) as exc:  # orjson's errors included
        raise ConfigError(f"{source}: not a trace written by agentcore ({exc!r})") from None
    text = svg if suffix == ".svg" else _html(svg, f"agentcore timeline: {source.name}")
    out.write_text(text, encoding="utf-8")
    return out
