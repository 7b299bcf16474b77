"""A trace file (:mod:`._observe.trace`) as a self-contained picture: SVG, or HTML around it.

Two passes over the file, each streaming (:func:`~._observe.trace.read_trace`): the first finds
the time span and the track counts, the second draws. What is kept is bounded by the picture,
not by the batch: slices narrower than three pixels that touch on one track are merged into one
shape (drawn with the count in its tooltip), and utilisation and queue length are kept in a
fixed number of time bins.

From top to bottom: a summary line; one row per inference slot (each attempt coloured by its
agent, a dark tick at the first token of a streamed reply, errors in red, cancelled attempts
grey); slot utilisation over time (share of slots busy, filled) with the number of requests
waiting for a slot (line); tool executions (label ``tool (W calls)`` when shared); the tool
calls answered without an execution of their own, from the cache or by joining a shared
execution (stacked bars per time bin, from the trace's instant events); back-offs; the waits
of tool calls for a concurrency cap (only when some call waited). The summary
line counts every tool call: executions, calls that shared one, calls from the cache.
Hovering a shape in a browser shows its details (SVG ``<title>``).
"""

from __future__ import annotations

import colorsys
import math
import os
from html import escape
from pathlib import Path
from typing import Any

from .._core.errors import ConfigError
from .trace import BACKOFF_PID, BATCH_PID, SLOTS_PID, TOOL_WAITS_PID, TOOLS_PID, read_trace

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
    end = 0.0
    lanes = {SLOTS_PID: 0, TOOLS_PID: 0, BACKOFF_PID: 0, TOOL_WAITS_PID: 0}
    for event in read_trace(path):
        ts = event.get("ts")
        if isinstance(ts, int | float):
            end = max(end, ts + float(event.get("dur", 0.0)))
        pid, tid = event.get("pid"), event.get("tid")
        if event.get("ph") == "X" and pid in lanes and isinstance(tid, int):
            lanes[pid] = max(lanes[pid], tid)
    return {"end_us": max(end, 1.0), "lanes": lanes}


def _draw(path: str | os.PathLike[str], scan: dict[str, Any]) -> str:
    end_us: float = scan["end_us"]
    lanes: dict[int, int] = scan["lanes"]
    plot_w = _WIDTH - _LEFT - _RIGHT
    scale = plot_w / end_us

    def x(us: float) -> float:
        return _LEFT + us * scale

    rows = {pid: [_Row() for _ in range(n)] for pid, n in lanes.items()}
    busy = [0.0] * _BINS
    waiting = [-1] * _BINS  # -1: no sample in the bin (the previous value holds)
    bin_us = end_us / _BINS
    ticks: list[tuple[float, int]] = []
    attempts = failed = cancelled_attempts = executions = shared_calls = backoffs = 0
    cap_waits = 0
    cached_bins = [0] * _BINS  # calls answered from the cache, per time bin
    shared_bins = [0] * _BINS  # calls that joined a shared execution, per time bin
    results: dict[str, int] = {}
    slot_busy_us = 0.0
    for event in read_trace(path):
        ph, pid = event.get("ph"), event.get("pid")
        if ph == "C" and pid == BATCH_PID:
            args = event.get("args", {})
            if event.get("name") == "slots":
                b = min(_BINS - 1, int(event["ts"] / bin_us))
                waiting[b] = max(waiting[b], int(args.get("waiting", 0)))
            elif event.get("name") == "results":
                results = {k: int(v) for k, v in args.items()}
            continue
        if ph == "i" and pid == TOOLS_PID:
            b = min(_BINS - 1, int(float(event["ts"]) / bin_us))
            source = event.get("args", {}).get("source")
            if source == "cached":
                cached_bins[b] += 1
            elif source == "coalesced":
                shared_bins[b] += 1
            continue
        if ph != "X" or pid not in rows:
            continue
        ts, dur = float(event["ts"]), float(event.get("dur", 0.0))
        row = rows[pid][int(event["tid"]) - 1]
        args = event.get("args", {})
        name = str(event.get("name", ""))
        if pid == SLOTS_PID:
            if name == "streaming":
                continue
            attempts += 1
            slot_busy_us += dur
            first = int(ts / bin_us)
            last = min(_BINS - 1, int((ts + dur) / bin_us))
            for b in range(first, last + 1):
                lo, hi = max(ts, b * bin_us), min(ts + dur, (b + 1) * bin_us)
                busy[b] += max(0.0, hi - lo)
            cname = event.get("cname")
            if cname == "terrible":
                failed += 1
                fill = "#d62728"
            elif cname == "grey":
                cancelled_attempts += 1
                fill = "#bdbdbd"
            else:
                fill = _agent_colour(args.get("agent"))
            tip = f"{name}: {dur / 1e3:.1f} ms"
            if "ttft_ms" in args:
                tip += f", first token after {args['ttft_ms']:.1f} ms"
                if dur * scale >= 4 and len(ticks) < 50_000:
                    ticks.append((x(ts + args["ttft_ms"] * 1e3), int(event["tid"])))
            if args.get("slot_wait_ms"):
                tip += f", waited {args['slot_wait_ms']:.0f} ms for the slot"
            if "error" in args:
                tip += f" — {args['error']}"
            row.add(x(ts), x(ts + dur), fill, tip)
        elif pid == TOOLS_PID:
            executions += 1
            shared_calls += max(0, int(args.get("waiters", 1)) - 1)
            fill = "#d62728" if event.get("cname") == "terrible" else "#4c78a8"
            tip = f"{name}: {dur / 1e3:.1f} ms" + (f" — {args['error']}" if "error" in args else "")
            row.add(x(ts), x(ts + dur), fill, tip)
        elif pid == BACKOFF_PID:
            backoffs += 1
            row.add(x(ts), x(ts + dur), "#f2a541", f"{name}: {dur / 1e3:.0f} ms")
        else:
            cap_waits += 1
            row.add(x(ts), x(ts + dur), _CAP_WAIT, f"{name}: {dur / 1e3:.0f} ms")
    for pid_rows in rows.values():
        for r in pid_rows:
            r.flush()
    held = 0
    for b in range(_BINS):
        held = waiting[b] = held if waiting[b] < 0 else waiting[b]

    n_slots = lanes[SLOTS_PID]
    util = slot_busy_us / (n_slots * end_us) if n_slots else 0.0
    done = ", ".join(f"{v} {k}" for k, v in results.items() if v) or "no agent finished"
    cached, joined = sum(cached_bins), sum(shared_bins)
    if not joined:
        joined = shared_calls  # a trace without the instants (older agentcore)
    summary = (
        f"{sum(results.values())} agents ({done}) · {end_us / 1e6:.2f} s · "
        f"{attempts} model attempts on {n_slots} slots ({failed} failed) · "
        f"slot utilisation {100 * util:.0f}% · {executions + joined + cached} tool calls: "
        f"{executions} executions, {joined} shared one, {cached} from the cache · "
        f"{backoffs} back-offs"
    )

    out: list[str] = []
    y = 66.0

    def label(text: str, yy: float, size: int = 11, weight: str = "normal") -> None:
        out.append(
            f"<text x='{_LEFT - 8}' y='{yy:.1f}' text-anchor='end' font-size='{size}' "
            f"font-weight='{weight}' {_FONT}>{escape(text)}</text>"
        )

    def section(title: str, yy: float) -> None:
        out.append(
            f"<text x='8' y='{yy:.1f}' font-size='12' font-weight='bold' {_FONT}>"
            f"{escape(title)}</text>"
        )

    def shapes(pid_rows: list[_Row], top: float, height: float, text: bool) -> float:
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

    # slots
    section("inference slots", y - 6)
    slot_top = y
    y = shapes(rows[SLOTS_PID], y, _SLOT_H, True)
    for i in range(n_slots):
        label(f"slot {i + 1}", slot_top + i * (_SLOT_H + 2) + _SLOT_H - 4, 10)
    for tx, tid in ticks:
        yy = slot_top + (tid - 1) * (_SLOT_H + 2)
        out.append(
            f"<line x1='{tx:.2f}' x2='{tx:.2f}' y1='{yy + 2:.1f}' y2='{yy + _SLOT_H - 2:.1f}' "
            "stroke='#222' stroke-width='1'/>"
        )

    # utilisation chart
    y += 26
    section("slot utilisation and queue", y - 8)
    chart_top, chart_bottom = y, y + _CHART_H
    out.append(
        f"<rect x='{_LEFT}' y='{chart_top}' width='{plot_w}' height='{_CHART_H}' fill='#f4f4f4'/>"
    )
    points = [f"{_LEFT},{chart_bottom}"]
    for b in range(_BINS):
        share = busy[b] / (bin_us * n_slots) if n_slots else 0.0
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
    label("100% busy", chart_top + 9, 9)
    label("0", chart_bottom, 9)
    out.append(
        f"<text x='{_LEFT + plot_w - 4}' y='{chart_top + 11}' text-anchor='end' font-size='10' "
        f"fill='#e6550d' {_FONT}>waiting for a slot (peak {max(waiting)})</text>"
    )
    y = chart_bottom + 26

    # tools and back-offs
    section("tool executions", y - 8)
    tools_top = y
    y = shapes(rows[TOOLS_PID], y, _SMALL_H, True)
    if lanes[TOOLS_PID]:
        label(f"{lanes[TOOLS_PID]} at most at once", tools_top + _SMALL_H - 2, 9)
    else:
        label("none", tools_top + 4, 9)
        y += 8
    y += 22
    section("tool calls answered without an execution (from the cache, shared)", y - 8)
    answered_top, answered_bottom = y, y + _ANSWERED_H
    out.append(
        f"<rect x='{_LEFT}' y='{answered_top}' width='{plot_w}' height='{_ANSWERED_H}' "
        "fill='#f4f4f4'/>"
    )
    most = max((c + s for c, s in zip(cached_bins, shared_bins, strict=True)), default=0)
    bar_w = plot_w / _BINS
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
                f"<rect x='{_LEFT + b * bar_w:.2f}' y='{base - h:.1f}' width='{bar_w:.2f}' "
                f"height='{h:.1f}' fill='{fill}'><title>{count} calls {what} "
                f"({t0:.2f}-{t0 + bin_us / 1e6:.2f} s)</title></rect>"
            )
            base -= h
    label(f"{cached} cached", answered_top + 14, 9)
    label(f"{joined} shared", answered_top + 28, 9)
    y = answered_bottom + 22
    section("back-offs (no slot held)", y - 8)
    backoff_top = y
    y = shapes(rows[BACKOFF_PID], y, _SMALL_H, False)
    if not lanes[BACKOFF_PID]:
        label("none", backoff_top + 4, 9)
        y += 8
    if lanes[TOOL_WAITS_PID]:  # drawn only for batches whose tool calls waited for a cap
        y += 22
        section("tool calls waiting for a concurrency cap (no slot held)", y - 8)
        waits_top = y
        y = shapes(rows[TOOL_WAITS_PID], y, _SMALL_H, False)
        label(f"{cap_waits} waits", waits_top + _SMALL_H - 2, 9)

    # time axis
    y += 8
    step = _tick_step(end_us / 1e6)
    t = 0.0
    while t * 1e6 <= end_us + 1:
        tx = x(t * 1e6)
        out.append(
            f"<line x1='{tx:.1f}' x2='{tx:.1f}' y1='{slot_top - 4}' y2='{y}' stroke='#000' "
            "stroke-opacity='0.12'/>"
        )
        out.append(
            f"<text x='{tx:.1f}' y='{y + 12}' text-anchor='middle' font-size='10' {_FONT}>"
            f"{t:g} s</text>"
        )
        t += step
    y += 30
    legend = [
        ("#4c78a8", "tool execution"),
        (_CACHED, "call from the cache"),
        (_SHARED, "call that shared an execution"),
        (_MERGED, "slices too short to draw apart"),
        ("#d62728", "failed attempt / tool error"),
        ("#bdbdbd", "cancelled"),
        ("#f2a541", "back-off"),
        *([(_CAP_WAIT, "wait for a tool cap")] if lanes[TOOL_WAITS_PID] else []),
    ]
    lx = float(_LEFT)
    out.append(
        f"<text x='8' y='{y}' font-size='10' {_FONT}>attempts are coloured by agent; "
        "a dark tick marks a streamed reply's first token</text>"
    )
    y += 16
    for colour, text in legend:
        out.append(f"<rect x='{lx}' y='{y - 9}' width='12' height='10' fill='{colour}'/>")
        out.append(f"<text x='{lx + 16}' y='{y}' font-size='10' {_FONT}>{escape(text)}</text>")
        lx += 30 + 6.2 * len(text)
    height = y + 12
    head = (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{_WIDTH}' height='{height:.0f}' "
        f"viewBox='0 0 {_WIDTH} {height:.0f}'>"
        f"<rect width='100%' height='100%' fill='white'/>"
        f"<text x='8' y='18' font-size='14' font-weight='bold' {_FONT}>agentcore batch "
        f"timeline</text><text x='8' y='34' font-size='11' {_FONT}>{escape(summary)}</text>"
    )
    return head + "".join(out) + "</svg>\n"


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
        trace: the trace file (one still being written, or cut short by a crash, works too).
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
