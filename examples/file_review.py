"""Review Python files in a batch: one typed report per file.

Runs on the embedded simulated backend by default; point it at a real server with
``--backend vllm://127.0.0.1:8000 --model Qwen/Qwen2.5-32B-Instruct``.

    python examples/file_review.py src/agentcore --limit 20
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal

import attrs
import trio

import agentcore

ROOT = Path.cwd()


@agentcore.tool(cache=True)
def read_lines(path: str, start: int = 1, count: int = 80) -> str:
    """Read lines of a file below the working directory.

    Args:
        path: the file, relative to the working directory.
        start: first line to read (1-based).
        count: how many lines to read.
    """
    target = (ROOT / path).resolve()
    if ROOT not in target.parents:
        raise PermissionError(f"{path} is outside the reviewed tree")
    lines = target.read_text(encoding="utf-8", errors="replace").splitlines()
    chunk = lines[max(start, 1) - 1 : max(start, 1) - 1 + max(count, 1)]
    return "\n".join(f"{start + i:5d}  {line}" for i, line in enumerate(chunk))


@attrs.frozen
class Finding:
    line: int
    severity: Literal["low", "medium", "high"]
    description: str


@attrs.frozen
class BugReport:
    path: str
    summary: str
    findings: list[Finding]


TASK = agentcore.Task(
    name="review",
    system=(
        "You review Python files for bugs. Read the file with read_lines, then report "
        "concrete problems with their line numbers. Report nothing you cannot point at."
    ),
    prompt="Review this file and report its bugs.\n\nFile: {path}",
    tools=[read_lines],
    output=BugReport,
    max_turns=4,
)


async def main(paths: list[str], backend: str, model: str, max_inflight: int) -> int:
    inputs = [{"path": p} for p in paths]
    failed = 0
    async with agentcore.open_batch(
        TASK, inputs, backend=backend, model=model, max_inflight=max_inflight
    ) as results:
        async for result in results:
            path = paths[result.index]
            if result.status == "ok":
                report = result.output
                print(f"{path}: {len(report.findings)} finding(s) — {report.summary[:60]}")
            else:
                failed += 1
                reason = result.error.message if result.error else result.status
                print(f"{path}: {result.status} ({reason})")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="src/agentcore")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--backend", default="sim://")
    parser.add_argument("--model", default="sim")
    parser.add_argument("--max-inflight", type=int, default=16)
    args = parser.parse_args()
    files = sorted(str(p) for p in Path(args.folder).rglob("*.py"))[: args.limit]
    sys.exit(trio.run(main, files, args.backend, args.model, args.max_inflight))
