"""Starting and stopping a local server by the pid recorded at start (stdlib only), shared by
``tools/llamacpp/server.py`` and ``tools/vllm/server.py``.

A server runs in a run directory of its own (``pid``, ``server.log``), in a new session, so
its process group is its pid: ``stop`` sends SIGTERM to that group (a server made of several
processes goes whole), waits, then SIGKILL, and removes the run directory. It never touches a
process it did not start. :func:`main` is the command line every server script has
(``start --port N ... [--wait S] [-- extra arguments]``, ``stop --port N``).
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def answers(url: str, timeout: float) -> bool:
    """Whether ``GET url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def running(where: Path) -> bool:
    """Whether the server of run directory ``where`` still runs."""
    pid_file = where / "pid"
    return pid_file.exists() and alive(int(pid_file.read_text()))


def launch(
    name: str,
    command: Sequence[str],
    where: Path,
    port: int,
    *,
    ready: str,
    wait: float,
    env: Mapping[str, str] | None = None,
    poll: float = 0.1,
    grace: float = 10.0,
) -> int:
    """Start ``command`` with its log and pid in ``where``; print the base URL once
    ``http://127.0.0.1:PORT{ready}`` answers 200, or the log's tail if it exits or ``wait``
    seconds pass first (the server is then stopped). Returns the exit status for ``main``."""
    where.mkdir(parents=True, exist_ok=True)
    pid_file = where / "pid"
    with (where / "server.log").open("wb") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=None if env is None else dict(env),
        )  # fmt: skip
    pid_file.write_text(str(process.pid))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pid_file.unlink(missing_ok=True)
            print(f"{name} exited at start:\n{_tail(where)}", file=sys.stderr)
            return 1
        if answers(url + ready, timeout=2):
            print(url)
            return 0
        time.sleep(poll)
    stop_pid(process.pid, grace)
    pid_file.unlink(missing_ok=True)
    print(f"{name} did not answer within {wait} s:\n{_tail(where)}", file=sys.stderr)
    return 1


def _tail(where: Path, lines: int = 20) -> str:
    return "\n".join((where / "server.log").read_text(errors="replace").splitlines()[-lines:])


def stop_pid(pid: int, grace: float = 10.0) -> None:
    """SIGTERM ``pid``'s process group (``pid`` alone when it leads none), SIGKILL what is
    left after ``grace`` seconds, and wait for the group to go."""
    if not alive(pid):
        return
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return
    own_group = group == pid  # made by start_new_session: the group is the server's

    def send(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            if own_group:
                os.killpg(group, sig)
            else:
                os.kill(pid, sig)

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        send(signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child
    if own_group:
        # Children (an engine core) may outlive the leader for a moment.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        send(signal.SIGKILL)


def stop(where: Path, grace: float = 10.0) -> int:
    """Stop the server of run directory ``where`` and remove the directory."""
    pid_file = where / "pid"
    if not pid_file.exists():
        return 0
    stop_pid(int(pid_file.read_text()), grace)
    shutil.rmtree(where, ignore_errors=True)
    return 0


def main(
    argv: Sequence[str] | None,
    *,
    description: str,
    server: str,
    wait: float,
    options: Callable[[argparse.ArgumentParser], None],
    start: Callable[[argparse.Namespace], int],
    stop: Callable[[argparse.Namespace], int],
) -> int:
    """Parse ``start --port N [options] [--wait S] [-- extra]`` or ``stop --port N`` and run
    ``start`` or ``stop``: ``options`` adds the server's own start options, ``wait`` is the
    default of ``--wait``, ``server`` names what the extra arguments are for."""
    parser = argparse.ArgumentParser(description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("start")
    up.add_argument("--port", type=int, required=True)
    options(up)
    up.add_argument("--wait", type=float, default=wait)
    up.add_argument("extra", nargs="*", help=f"more {server} arguments (after --)")
    down = commands.add_parser("stop")
    down.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    return start(args) if args.command == "start" else stop(args)
