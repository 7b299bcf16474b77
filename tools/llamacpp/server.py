"""Start and stop llama-server on 127.0.0.1, by the pid recorded at start (stdlib only).

    python tools/llamacpp/server.py start --port N [--model tiny] [--slots 8] [--ctx 8192]
                                          [--slot-save] [-- extra llama-server arguments]
    python tools/llamacpp/server.py stop --port N

``start`` prints the server's base URL (``http://127.0.0.1:N``) once ``/health`` answers 200.
Run files live in ``$AGENTCORE_LLAMACPP_HOME/run-PORT`` while the server runs (``stop``
removes them): ``pid``, ``server.log`` and, with ``--slot-save``, the ``slots/`` directory
given to ``--slot-save-path`` (llama-server's slot
save/restore API, used by agentcore's slot-copy warm-up). ``--model`` is a model name written
by ``setup.sh`` (``tiny``, ``small``) or a path to a ``.gguf`` file. ``--ctx`` is the context
of one slot; the server gets ``slots x ctx`` in all (llama-server divides it among slots).

The server always runs with ``--jinja`` (the model's chat template, needed for tool calls),
``--metrics`` (``/metrics``: prompt tokens computed, read by the benchmark) and
``--cont-batching``. ``stop`` sends SIGTERM, waits up to 10 s, then SIGKILL, and removes the
pid file; it never touches a process it did not start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import serverctl  # tools/serverctl.py, shared with tools/vllm

VERSION = "0.3.36"
HOME = Path(os.environ.get("AGENTCORE_LLAMACPP_HOME", Path.home() / ".cache/agentcore-llamacpp"))
BINARY = HOME / VERSION / "bin" / "llama-server"
MODELS = HOME / "models"


def run_dir(port: int) -> Path:
    return HOME / f"run-{port}"


def start(args: argparse.Namespace) -> int:
    if not BINARY.exists():
        print(f"llama-server is not built: run tools/llamacpp/setup.sh ({BINARY})", file=sys.stderr)
        return 1
    model = Path(args.model) if args.model.endswith(".gguf") else MODELS / f"{args.model}.gguf"
    if not model.exists():
        print(f"no model {model}: run tools/llamacpp/setup.sh", file=sys.stderr)
        return 1
    where = run_dir(args.port)
    if serverctl.running(where):
        print(f"llama-server already runs on port {args.port}", file=sys.stderr)
        return 1
    where.mkdir(parents=True, exist_ok=True)
    command = [
        str(BINARY), "-m", str(model), "-a", model.stem,
        "--host", "127.0.0.1", "--port", str(args.port),
        "-np", str(args.slots), "-c", str(args.slots * args.ctx),
        "-t", str(args.threads or os.cpu_count() or 1),
        "--jinja", "--metrics", "--cont-batching", "--no-webui",
    ]  # fmt: skip
    if args.slot_save:
        slots = where / "slots"
        shutil.rmtree(slots, ignore_errors=True)
        slots.mkdir()
        command += ["--slot-save-path", f"{slots}/"]
    command += args.extra
    return serverctl.launch(
        "llama-server", command, where, args.port, ready="/health", wait=args.wait
    )


def stop(args: argparse.Namespace) -> int:
    # The pid, the log and the saved slots (MBs each) go: run directories do not pile up.
    return serverctl.stop(run_dir(args.port))


def options(up: argparse.ArgumentParser) -> None:
    up.add_argument("--model", default="tiny")
    up.add_argument("--slots", type=int, default=8)
    up.add_argument("--ctx", type=int, default=8192, help="context tokens per slot")
    up.add_argument("--threads", type=int, default=0)
    up.add_argument("--slot-save", action="store_true", help="enable the slot save/restore API")


def main(argv: list[str] | None = None) -> int:
    return serverctl.main(
        argv, description="llama-server on 127.0.0.1", server="llama-server", wait=60.0,
        options=options, start=start, stop=stop,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
