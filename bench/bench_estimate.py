"""Rate budgets set to what the server enforces: 429s, and the prompt estimate's error per shape.

The scenario of ``tests/sim/test_rate_limits.py`` (imported from it): 200 agents (a
1,300-character system prompt, two tools with schemas, tool results of about 500 characters of
JSON, two tool turns, 32 requests in flight) against sim:// enforcing 30,000 tokens and 1,000
requests a minute, in virtual time (trio's ``MockClock``: the counts are
deterministic, the run takes seconds). The driver is told the same limits (``configured``)
or learns them from the server's headers (``learned``); with and without the tools.
Reported: answers 429 and failed agents. A second table runs a typed task whose runs end
with the forced final request (three tool rounds offered, two allowed) and gives the prompt
estimate's error per request shape: how far the estimate each reservation was made with was
from the server's ``usage.prompt_tokens``.

With ``--baseline-rev REV`` the 429 counts are measured again with the library at that git
revision (in a child process; the per-shape errors are this tree's only).

Run: ``.venv/bin/python bench/bench_estimate.py [--baseline-rev f85c70f]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio
import trio.testing
from _common import ROOT, baseline_source, child_report, table

sys.path.insert(0, str(ROOT))
from tests.sim.test_rate_limits import RecordState, run_limited_batch


async def batch(tools: bool, configured: bool, typed: bool) -> dict[str, Any]:
    """The scenario of ``tests/sim/test_rate_limits.py``: 200 agents (120 with a typed task
    whose runs end with the forced final request)."""
    if typed:
        results, rates = await run_limited_batch(
            120, tools=tools, configured=configured, tool_rounds=3, output=RecordState
        )
    else:
        results, rates = await run_limited_batch(200, tools=tools, configured=configured)
    errors = [
        {"shape": e.shape.value, "requests": e.requests, "mean": e.mean,
         "mean_abs": e.mean_abs, "worst_short": e.worst_short}
        for e in getattr(rates, "estimates", ())
    ]  # fmt: skip
    return {"rate_limited": rates.rate_limited,
            "failed": sum(r.status != "ok" for r in results), "errors": errors}  # fmt: skip


def measure(tools: bool, configured: bool, typed: bool) -> dict[str, Any]:
    clock = trio.testing.MockClock(autojump_threshold=0)
    found: dict[str, Any] = trio.run(batch, tools, configured, typed, clock=clock)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-rev", help="also count 429s at this git revision")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*(flag == "1" for flag in args.child))))
        return
    cases = [(tools, configured) for tools in (True, False) for configured in (True, False)]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        old = args.baseline_rev and baseline_source(args.baseline_rev, Path(folder))
        for tools, configured in cases:
            now = measure(tools, configured, typed=False)
            row = ["with tools" if tools else "no tools", "configured" if configured else "learned",
                   f"{now['rate_limited']} ({now['failed']} failed)"]  # fmt: skip
            if old:
                flags = ["1" if tools else "0", "1" if configured else "0", "0"]
                before = child_report([sys.executable, __file__, "--child", *flags], src=old)
                row.append(f"{before['rate_limited']} ({before['failed']} failed)")
            rows.append(row)
    headers = ["task", "limits", "429s, this tree"]
    if old:
        headers.append(f"429s, {args.baseline_rev}")
    print(table(headers, rows))
    typed = measure(tools=True, configured=True, typed=True)
    print()
    print(f"typed task, 120 agents: {typed['rate_limited']} answers 429")
    print(table(
        ["shape", "requests", "mean error", "mean |error|", "worst short"],
        [[e["shape"], str(e["requests"]), f"{100 * e['mean']:+.1f} %",
          f"{100 * e['mean_abs']:.1f} %", f"{100 * e['worst_short']:.1f} %"]
         for e in typed["errors"]],
    ))  # fmt: skip


if __name__ == "__main__":
    main()
