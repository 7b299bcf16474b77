"""Start and stop vllm-router on 127.0.0.1 in front of engine replicas, by the pid recorded at
start (stdlib only).

    python tools/router/server.py start --port N --worker URL --worker URL
                                        [--policy consistent_hash] [--wait 60]
                                        [-- extra vllm-router arguments]
    python tools/router/server.py stop --port N

``start`` prints the router's base URL (``http://127.0.0.1:N``) once ``GET /readiness``
answers 200; the router itself first waits until every worker answers its health check.
The router is the ``vllm-router`` console script of the venv written by ``install.sh``
(``$AGENTCORE_ROUTER_HOME``, by default ``~/.cache/agentcore-router``), started with
``--log-level info`` (with ``consistent_hash`` it logs the key each request was hashed on and
the worker it went to), its worker checks at start every second (not every 30 s) and its
Prometheus metrics on a free port of 127.0.0.1 (not the fixed 29000). Run files live in
``$AGENTCORE_ROUTER_HOME/run-PORT`` (``pid``, ``server.log``); ``stop`` sends SIGTERM to that
pid's process group, then SIGKILL, and removes them. It never touches a process it did not
start.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import serverctl  # tools/serverctl.py, shared with tools/vllm and tools/llamacpp

VERSION = "0.1.17"
HOME = Path(os.environ.get("AGENTCORE_ROUTER_HOME", Path.home() / ".cache/agentcore-router"))
ROUTER = HOME / f"venv-{VERSION}" / "bin" / "vllm-router"
POLICIES = (
    "random", "round_robin", "cache_aware", "kv_aware", "power_of_two", "consistent_hash",
    "sticky_least_loaded",
)  # fmt: skip


def run_dir(port: int) -> Path:
    return HOME / f"run-{port}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command(args: argparse.Namespace) -> list[str]:
    # The router checks its workers every 30 s at start by default, and serves its Prometheus
    # metrics on port 29000 unless told otherwise (a second router would fail to bind it).
    return [
        str(ROUTER), "--host", "127.0.0.1", "--port", str(args.port),
        "--worker-urls", *args.worker, "--policy", args.policy, "--log-level", "info",
        "--worker-startup-check-interval", "1", "--prometheus-host", "127.0.0.1",
        "--prometheus-port", str(free_port()), *args.extra,
    ]  # fmt: skip


def start(args: argparse.Namespace) -> int:
    if not ROUTER.exists():
        print(f"vllm-router is not installed: run tools/router/install.sh ({ROUTER})",
              file=sys.stderr)  # fmt: skip
        return 1
    where = run_dir(args.port)
    if serverctl.running(where):
        print(f"a router already runs on port {args.port}", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env["NO_COLOR"] = "1"  # plain log lines, to be read by tests
    return serverctl.launch(
        "vllm-router", command(args), where, args.port, ready="/readiness", wait=args.wait,
        env=env, poll=0.2, grace=5.0,
    )  # fmt: skip


def stop(args: argparse.Namespace) -> int:
    return serverctl.stop(run_dir(args.port), grace=5.0)


def options(up: argparse.ArgumentParser) -> None:
    up.add_argument("--worker", action="append", required=True, help="a replica's base URL")
    up.add_argument("--policy", choices=POLICIES, default="consistent_hash")


def main(argv: list[str] | None = None) -> int:
    return serverctl.main(
        argv, description="vllm-router on 127.0.0.1", server="vllm-router", wait=60.0,
        options=options, start=start, stop=stop,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
