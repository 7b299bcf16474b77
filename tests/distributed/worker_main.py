"""A worker process running the deterministic agent of ``agents.py`` (tests and chaos runs).

python tests/distributed/worker_main.py URL --turns 2 --latency 0.05 --lease 1.0
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).parent))

from agents import CountingModel, make_task

import agentcore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("queue")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--max-inflight", type=int, default=64)
    parser.add_argument("--max-deliveries", type=int, default=20)
    parser.add_argument("--no-compare", action="store_true")
    parser.add_argument("--no-heartbeat", action="store_true")
    parser.add_argument("--no-audit", action="store_true")
    args = parser.parse_args()
    stats = trio.run(
        lambda: agentcore.run_worker(
            args.queue,
            make_task(args.turns),
            backend=CountingModel(args.turns, args.latency),
            max_inflight=args.max_inflight,
            lease=args.lease,
            max_deliveries=args.max_deliveries,
            exit_when_done=True,
            block_ms=200,
            audit=not args.no_audit,
            compare=not args.no_compare,
            heartbeat=not args.no_heartbeat,
        )
    )
    print(stats, file=sys.stderr)


if __name__ == "__main__":
    main()
