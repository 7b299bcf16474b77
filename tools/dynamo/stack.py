"""Start and stop a local NVIDIA Dynamo stack: an OpenAI-compatible frontend and a mocker engine.

Standard library only, so tests and benchmarks import it from any interpreter; the Dynamo
processes themselves run from the virtual environment that ``tools/dynamo/setup.sh`` builds
under ``$AGENTCORE_DYNAMO_HOME`` (default ``~/.cache/agentcore-dynamo``).

How the stack runs without etcd, NATS or a GPU:

- both processes discover each other through files (``--discovery-backend file`` and a shared
  ``DYN_FILE_KV`` directory), requests travel over TCP (``DYN_REQUEST_PLANE=tcp``) and KV
  events over ZMQ (``DYN_EVENT_PLANE=zmq``); every host variable names 127.0.0.1;
- the frontend (``python -m dynamo.frontend``) serves HTTP on 127.0.0.1:PORT with the
  KV-aware router and, when tracing is on, writes one JSONL record per request under
  ``RUN_DIR/trace/``;
- the mocker (``mocker_hermes.py``) simulates prefill and decode time and a block prefix
  cache for the weightless ``tinymodel`` and declares the hermes tool-call parser; with a
  replay file, requests annotated ``output_replay_id:KEY`` get KEY's scripted reply.

Processes are stopped by the pids this module started (recorded in ``RUN_DIR/*.pid``), never
by name. Command line::

    python tools/dynamo/stack.py start [--port N] [--replay FILE] [--speedup X]   # prints the URL
    python tools/dynamo/stack.py stop --port N
    python tools/dynamo/stack.py replay SCRIPT.json OUT.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DYNAMO_VERSION = "1.6.1"
MODEL_NAME = "tiny-mock"
TOOLS = Path(__file__).resolve().parent


class StackError(RuntimeError):
    """Dynamo could not be installed, started or reached."""


def dynamo_home() -> Path:
    """``$AGENTCORE_DYNAMO_HOME``, or ``~/.cache/agentcore-dynamo``."""
    configured = os.environ.get("AGENTCORE_DYNAMO_HOME")
    return Path(configured) if configured else Path.home() / ".cache" / "agentcore-dynamo"


@dataclass(frozen=True)
class Install:
    """A Dynamo installation made by ``setup.sh``."""

    home: Path
    python: Path
    model_dir: Path

    @classmethod
    def find(cls, home: Path | None = None) -> Install | None:
        """The installation under ``home`` if ``setup.sh`` completed there, else ``None``."""
        home = home or dynamo_home()
        marker = home / "installed-version"
        python = home / "venv" / "bin" / "python"
        model = home / "tinymodel"
        try:
            version = marker.read_text().strip()
        except OSError:
            return None
        if version != DYNAMO_VERSION or not python.exists():
            return None
        if not (model / "tokenizer.json").exists():
            return None
        return cls(home, python, model)


def install(home: Path | None = None, *, timeout: float = 900.0) -> Install:
    """Run ``setup.sh`` (idempotent) and return the installation.

    Raises:
        StackError: the script failed or timed out.
    """
    home = home or dynamo_home()
    env = {**os.environ, "AGENTCORE_DYNAMO_HOME": str(home)}
    try:
        done = subprocess.run(
            ["bash", str(TOOLS / "setup.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise StackError(f"setup.sh did not finish within {timeout:.0f} s") from None
    found = Install.find(home)
    if done.returncode != 0 or found is None:
        raise StackError(
            f"setup.sh failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    return found


def build_replay(install: Install, script: Mapping[str, Any], out: Path) -> Path:
    """Write the replay file for ``script`` (``{key: reply}``, see ``build_replay.py``).

    Raises:
        StackError: the builder failed.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=out.parent, delete=False) as f:
        json.dump(dict(script), f)
        script_path = Path(f.name)
    try:
        done = subprocess.run(
            [str(install.python), str(TOOLS / "build_replay.py"), str(install.model_dir),
             str(script_path), str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )  # fmt: skip
    finally:
        script_path.unlink(missing_ok=True)
    if done.returncode != 0:
        raise StackError(f"build_replay.py failed:\n{done.stderr[-4000:]}")
    return out


def free_port(low: int = 20000, high: int = 32767) -> int:
    """A TCP port in ``[low, high]`` on 127.0.0.1 that nothing listens on right now.

    Dynamo reads ``DYN_SYSTEM_PORT`` as a signed 16-bit number, so its ports stay below
    32768 (the kernel's ephemeral range starts above that on Linux).
    """
    for _ in range(200):
        port = random.randint(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise StackError(f"no free TCP port in [{low}, {high}]")


def _stop_pid(pid: int, process: subprocess.Popen[bytes] | None, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; reap the child when we own it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                return
        else:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if process is not None:
        process.wait(timeout=10)


class DynamoStack:
    """One frontend + mocker pair on 127.0.0.1.

    Use as a context manager, or call :meth:`start` and :meth:`stop`::

        with DynamoStack(Install.find(), replay=path) as stack:
            backend = agentcore.wire.backend(stack.url, model=MODEL_NAME)

    Args:
        install: the Dynamo installation.
        port: the HTTP port (default: a free one).
        run_dir: where pids, logs, the file-discovery store and traces go (default:
            ``HOME/run-PORT``; emptied first).
        workers: mocker workers (the KV router chooses among them).
        speedup: the mocker's ``--speedup-ratio`` (1 = its default timing model).
        replay: a replay file from :func:`build_replay`, for scripted replies.
        trace: write request traces under ``run_dir/trace``.
        streaming_tool_dispatch: turn on the frontend's experimental ``tool_call_dispatch``
            SSE events.
        frontend_args, mocker_args: extra command-line arguments.
    """

    def __init__(
        self,
        install: Install,
        *,
        port: int | None = None,
        run_dir: Path | None = None,
        workers: int = 1,
        speedup: float = 10.0,
        replay: Path | None = None,
        trace: bool = True,
        streaming_tool_dispatch: bool = False,
        frontend_args: Sequence[str] = (),
        mocker_args: Sequence[str] = (),
    ) -> None:
        self.install = install
        self.port = port or free_port()
        self.run_dir = run_dir or install.home / f"run-{self.port}"
        self.workers = workers
        self.speedup = speedup
        self.replay = replay
        self.trace = trace
        self.streaming_tool_dispatch = streaming_tool_dispatch
        self.frontend_args = tuple(frontend_args)
        self.mocker_args = tuple(mocker_args)
        self._frontend: subprocess.Popen[bytes] | None = None
        self._mocker: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ addresses

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:PORT`` (append ``/v1/chat/completions``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The agentcore backend URL, ``dynamo://127.0.0.1:PORT``."""
        return f"dynamo://127.0.0.1:{self.port}"

    @property
    def trace_dir(self) -> Path:
        return self.run_dir / "trace"

    @property
    def frontend_pid(self) -> int | None:
        return None if self._frontend is None else self._frontend.pid

    @property
    def mocker_pid(self) -> int | None:
        return None if self._mocker is None else self._mocker.pid

    # ------------------------------------------------------------------ lifecycle

    def _environment(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DYN_", "VIRTUAL_ENV", "PYTHON"))
        }
        env.update(
            {
                "DYN_DISCOVERY_BACKEND": "file",
                "DYN_FILE_KV": str(self.run_dir / "kv"),
                "DYN_REQUEST_PLANE": "tcp",
                "DYN_EVENT_PLANE": "zmq",
                "DYN_TCP_RPC_HOST": "127.0.0.1",
                "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
                "DYN_EVENT_PLANE_HOST": "127.0.0.1",
                "DYN_SYSTEM_HOST": "127.0.0.1",
                "DYN_LOG": os.environ.get("AGENTCORE_DYNAMO_LOG", "warn"),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
            }
        )
        return env

    def start(self, timeout: float = 90.0) -> DynamoStack:
        """Start both processes and wait until the model is listed.

        Raises:
            StackError: a process exited, or the model did not appear within ``timeout``.
        """
        if self._frontend is not None:
            raise StackError("this stack is already started")
        if self.run_dir.exists():
            for stale in self.run_dir.glob("*.pid"):
                _stop_recorded(stale)
            _remove_tree(self.run_dir)
        (self.run_dir / "kv").mkdir(parents=True)
        self.trace_dir.mkdir()
        env = self._environment()
        frontend_env = dict(env)
        if self.trace:
            frontend_env.update(
                {
                    "DYN_REQUEST_TRACE": "1",
                    "DYN_REQUEST_TRACE_SINKS": "jsonl",
                    "DYN_REQUEST_TRACE_OUTPUT_PATH": str(self.trace_dir / "frontend"),
                }
            )
        python = str(self.install.python)
        frontend = [
            python, "-m", "dynamo.frontend",
            "--http-host", "127.0.0.1", "--http-port", str(self.port),
            "--discovery-backend", "file", "--router-mode", "kv",
            "--router-session-affinity-ttl-secs", "300",
        ]  # fmt: skip
        if self.streaming_tool_dispatch:
            frontend.append("--enable-streaming-tool-dispatch")
        frontend.extend(self.frontend_args)
        mocker = [
            python, str(TOOLS / "mocker_hermes.py"),
            "--model-path", str(self.install.model_dir), "--model-name", MODEL_NAME,
            "--num-workers", str(self.workers), "--speedup-ratio", str(self.speedup),
            "--discovery-backend", "file",
        ]  # fmt: skip
        if self.replay is not None:
            mocker += ["--response-replay-trace-path", str(self.replay)]
        mocker.extend(self.mocker_args)
        mocker_env = {**env, "DYN_SYSTEM_PORT": str(free_port())}
        try:
            self._frontend = self._spawn("frontend", frontend, frontend_env)
            self._mocker = self._spawn("mocker", mocker, mocker_env)
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.run_dir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.run_dir,
                start_new_session=True,
            )
        (self.run_dir / f"{name}.pid").write_text(f"{process.pid}\n")
        return process

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in (("frontend", self._frontend), ("mocker", self._mocker)):
                if process is not None and process.poll() is not None:
                    raise StackError(
                        f"the Dynamo {name} exited with status {process.returncode}:\n"
                        + self.log_tail(name)
                    )
            if MODEL_NAME in self._models():
                return
            time.sleep(0.2)
        raise StackError(
            f"Dynamo did not list {MODEL_NAME!r} on port {self.port} within {timeout:.0f} s\n"
            + self.log_tail("frontend")
            + self.log_tail("mocker")
        )

    def _models(self) -> list[str]:
        try:
            with urllib.request.urlopen(f"{self.http_url}/v1/models", timeout=2) as answer:
                listing = json.load(answer)
        except (OSError, ValueError):
            return []
        return [entry.get("id", "") for entry in listing.get("data", [])]

    def log_tail(self, name: str, size: int = 3000) -> str:
        """The end of a process log (``frontend`` or ``mocker``)."""
        try:
            text = (self.run_dir / f"{name}.log").read_bytes()[-size:].decode(errors="replace")
        except OSError:
            return ""
        return f"--- {name}.log (end) ---\n{text}\n"

    def stop_frontend(self, grace: float = 5.0) -> None:
        """Stop the frontend only (the mocker keeps running): the server goes away."""
        if self._frontend is not None:
            _stop_pid(self._frontend.pid, self._frontend, grace)
            (self.run_dir / "frontend.pid").unlink(missing_ok=True)

    def stop(self, grace: float = 5.0) -> None:
        """Stop both processes (by their pids). Safe to call twice."""
        for name in ("frontend", "mocker"):
            process = self._frontend if name == "frontend" else self._mocker
            if process is not None:
                _stop_pid(process.pid, process, grace)
                (self.run_dir / f"{name}.pid").unlink(missing_ok=True)

    def __enter__(self) -> DynamoStack:
        if self._frontend is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ traces

    def trace_records(self) -> list[dict[str, Any]]:
        """Every request-trace event written so far (the ``event`` objects, in file order)."""
        return read_trace(self.trace_dir)


def read_trace(trace_dir: Path) -> list[dict[str, Any]]:
    """The trace events in the JSONL (or gzipped JSONL) files under ``trace_dir``."""
    events: list[dict[str, Any]] = []
    for path in sorted(trace_dir.glob("*")):
        if not path.is_file():
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt") as lines:
                for raw in lines:
                    line = raw.strip()
                    if not line:
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue  # a line being written right now
                    events.append(record.get("event", record))
        except (OSError, EOFError):
            continue
    return events


def wait_for_trace(trace_dir: Path, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Wait until at least ``count`` ``request_end`` events are in the trace; return them all.

    Raises:
        StackError: fewer than ``count`` within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        ends = [e for e in read_trace(trace_dir) if e.get("event_type") == "request_end"]
        if len(ends) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if len(ends) < count:
        raise StackError(f"only {len(ends)} of {count} request traces in {trace_dir}")
    return ends


def _remove_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if child.is_dir() and not child.is_symlink():
            child.rmdir()
        else:
            child.unlink()
    path.rmdir()


def _stop_recorded(pid_file: Path, grace: float = 5.0) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    _stop_pid(pid, None, grace)
    pid_file.unlink(missing_ok=True)


@contextlib.contextmanager
def running_stack(**options: Any) -> Iterator[DynamoStack]:
    """Install if needed, start a stack with ``options``, stop it on exit."""
    found = Install.find() or install()
    with DynamoStack(found, **options) as stack:
        yield stack


# ---------------------------------------------------------------------- command line


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="run setup.sh (idempotent)")
    start = commands.add_parser("start", help="start a frontend + mocker; print the URL")
    start.add_argument("--port", type=int, default=None, help="HTTP port (default: a free one)")
    start.add_argument("--workers", type=int, default=1)
    start.add_argument("--speedup", type=float, default=10.0)
    start.add_argument("--replay", type=Path, default=None, help="replay file for scripted replies")
    start.add_argument("--no-trace", action="store_true", help="do not write request traces")
    start.add_argument("--streaming-tool-dispatch", action="store_true")
    stop = commands.add_parser("stop", help="stop the stack started on PORT (by its pids)")
    stop.add_argument("--port", type=int, required=True)
    replay = commands.add_parser("replay", help="build a replay file from a JSON script")
    replay.add_argument("script", type=Path)
    replay.add_argument("out", type=Path)
    args = parser.parse_args(argv)

    try:
        if args.command == "install":
            found = install()
            print(f"dynamo {DYNAMO_VERSION} ready in {found.home}")
        elif args.command == "start":
            found = Install.find() or install()
            stack = DynamoStack(
                found,
                port=args.port,
                workers=args.workers,
                speedup=args.speedup,
                replay=args.replay.resolve() if args.replay else None,
                trace=not args.no_trace,
                streaming_tool_dispatch=args.streaming_tool_dispatch,
            ).start()
            print(f"dynamo ready: {stack.url} (model {MODEL_NAME}; run dir {stack.run_dir})")
            # The processes outlive this command; `stop --port` ends them by their pids.
            stack._frontend = stack._mocker = None
        elif args.command == "stop":
            run_dir = dynamo_home() / f"run-{args.port}"
            for name in ("frontend", "mocker"):
                _stop_recorded(run_dir / f"{name}.pid")
            print(f"stopped the stack on port {args.port}")
        else:
            found = Install.find() or install()
            script = json.loads(args.script.read_text())
            build_replay(found, script, args.out)
            print(f"{len(script)} scripted replies written to {args.out}")
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
