"""The ``agentcore`` command line: ``run``, ``worker``, ``demo`` and ``sim``.

Exit codes (also in ``agentcore --help``):

- 0: every input finished ``ok``;
- 1: the batch finished, but some inputs failed or were cancelled (their lines say why);
- 2: nothing was run: bad arguments, task file, input file or backend configuration; or the
  journal cannot be used (held by another process, another task, a full disk);
- 130: interrupted (Ctrl-C); every result finished before that is in the output file.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any, TypeVar, get_args

import attrs
import orjson
import trio

from .._backends.urls import backend as make_backend
from .._backends.urls import is_batch
from .._codecs.dialects import DIALECTS
from .._codecs.values import json_value
from .._core.errors import ConfigError, JournalError, JournalMismatch
from .._core.results import NO_TOOL_FAILURES, Result
from .._core.retry import RetryPolicy
from .._core.service_tier import ServiceTier
from .._core.slots import SlotPolicy
from .._driver.open import open_driver
from .._driver.options import resolve_options
from .._driver.stats import TURN_BUCKETS, DriverStatistics
from .._observe.render import render_timeline
from .._observe.steps import (
    RunAborted,
    RunFinished,
    StepEvent,
    ToolEnded,
    ToolProgress,
)
from .._sim import SimConfig, run_sim_server
from .._tasks.batch import BATCH_SLOT_POLICY, new_batch_id, open_batch
from .._tasks.fingerprint import task_description
from .._tasks.journal import SqliteJournal, open_step_journal
from .._tasks.locks import FileLock
from .._tasks.results_file import (
    RecordCost,
    ResultRecord,
    ResultsFile,
    check_output_path,
    finished_indices,
    interrupted,
    split_resumed,
    step_journal_of,
)
from .._tasks.task import RenderError, Task, job_run_id, render_prompt
from .._tasks.taskfile import TaskFileError, load_task
from .batch_progress import journal_path, show_hops
from .demo import demo_inputs, demo_task
from .distributed import run_submitter, run_worker_command
from .logs import cli_logging

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_EPILOG = """exit codes:
  0    every input finished ok
  1    the batch finished, but some inputs failed or were cancelled
  2    nothing was run: bad arguments, task file, input file or backend;
       or the journal cannot be used (another process, another task, disk full)
  130  interrupted; results finished before that are in the output
"""


class InputFileError(ConfigError):
    """An inputs file is unreadable or holds a line that is not JSON."""


def read_inputs(path: Path, task: Task | None = None) -> list[Any]:
    """One input per non-blank line of a JSONL file (objects fill placeholders by name).

    With ``task`` given, every input must also fill the task's prompt template.

    Raises:
        InputFileError: naming every bad line (up to ten).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    inputs: list[Any] = []
    problems: list[tuple[str, frozenset[str]]] = []  # each with the placeholders it lacks
    first: tuple[int, Any] | None = None
    nowhere: frozenset[str] | None = None  # placeholders no input has so far
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            problems.append((f"{path}:{number}: not valid JSON: {exc}", frozenset()))
            continue
        if task is not None:
            missing = frozenset(task.missing_placeholders(value))
            nowhere = missing if nowhere is None else nowhere & missing
            first = first or (number, value)
            try:
                task.check_input(value)  # names the missing placeholders and the keys
                render_prompt(task, value)
            except RenderError as exc:
                problems.append((f"{path}:{number}: {exc}", missing))
                continue
        inputs.append(value)
    shown: list[str] = []
    if task is not None and first is not None and nowhere:
        # A placeholder that no input has is a fault of the template (a typo): said once.
        shown.append(_template_error(task, nowhere, path, *first))
        problems = [p for p in problems if not p[1] or not p[1] <= nowhere]
    if problems or shown:
        shown += [text for text, _ in problems[:10]]
        if len(problems) > 10:
            shown.append(f"... and {len(problems) - 10} more bad lines")
        raise InputFileError("\n".join(shown))
    return inputs


def _template_error(
    task: Task, nowhere: frozenset[str], path: Path, number: int, value: Any
) -> str:
    names = [name for name in task.placeholders if name in nowhere]
    shown = ", ".join(f"{{{name}}}" for name in names)
    if isinstance(value, Mapping):
        has = f"its keys: {', '.join(sorted(map(str, value))) or 'none'}"
    else:
        has = "not an object, so it fills {input} only"
    return (
        f"the prompt template's placeholder{'s' if len(names) > 1 else ''} {shown} "
        f"{'are' if len(names) > 1 else 'is'} in no input of {path} "
        f"(the first input, line {number}: {has})"
    )


def drop_unfinished(path: Path, lock: FileLock | None = None) -> list[int]:
    """Remove the lines of inputs that did not finish ``ok`` (failed, cancelled) from an output
    file, so that a resumed run runs them again; a torn last line is cut off too. The file is
    replaced atomically (``lock``, the file's lock, moves to the new file first). Returns the
    indices of the lines removed."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data[: data.rfind(b"\n") + 1].splitlines(keepends=True)
    kept: list[bytes] = []
    dropped: list[int] = []
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            kept.append(line)  # not ours to judge; resuming ignores it
            continue
        if not isinstance(record, dict) or record.get("status") in (None, "ok"):
            kept.append(line)
        elif isinstance(record.get("index"), int):
            dropped.append(record["index"])
        else:
            dropped.append(-1)
    spare = path.with_name(path.name + ".retry-failed")
    spare.write_bytes(b"".join(kept))
    if lock is not None:
        lock.adopt(spare)
    os.replace(spare, path)
    return dropped


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _ms(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{1000 * value:.0f} ms"


class _ToolProgress:
    """The step sink behind the progress line's tool part: the latest
    :class:`~agentcore.ToolProgress` of each tool call still in progress (bounded by them)."""

    deltas = False

    def __init__(self) -> None:
        self.calls: dict[tuple[int, str], ToolProgress] = {}

    def push(self, event: StepEvent) -> None:
        kind = type(event)
        if kind is ToolProgress:
            assert isinstance(event, ToolProgress)
            key = (event.run, event.call_id)
            self.calls.pop(key, None)
            self.calls[key] = event  # the latest report last
        elif kind is ToolEnded and self.calls:
            assert isinstance(event, ToolEnded)
            self.calls.pop((event.run, event.call_id), None)
        elif (kind is RunFinished or kind is RunAborted) and self.calls:
            run = event.run
            for key in [k for k in self.calls if k[0] == run]:
                del self.calls[key]  # calls cut short by the run's end

    async def settle(self) -> None:
        """Never waits."""

    def describe(self) -> str:
        """`` · tool 40% message (+N)`` for the latest report, or ``""``."""
        if not self.calls:
            return ""
        latest = next(reversed(self.calls.values()))
        text = f" · {latest.tool} {100 * latest.fraction:.0f}%"
        if latest.message:
            text += f" {latest.message[:30]}"
        if len(self.calls) > 1:
            text += f" (+{len(self.calls) - 1})"
        return text


class _Progress:
    """A one-line progress display on a terminal's stderr."""

    def __init__(self, total: int, stream: IO[str], enabled: bool) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self._stream = stream
        self._enabled = enabled
        self.tools: _ToolProgress | None = _ToolProgress() if enabled else None
        """What long tools report (a step sink given to the batch when the line is shown)."""

    def line(self, stats: DriverStatistics) -> str:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        running = max(0, self.total - self.done)
        return (
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} done"
            f" · {self.failed} failed · {running} running"
            f" · cached {_pct(stats.cached_ratio)}"
            f" · tools {stats.tool_executions} run / {stats.tool_calls} calls"
            + ("" if self.tools is None else self.tools.describe())
        )

    def show(self, stats: DriverStatistics) -> None:
        if self._enabled:
            self._stream.write(self.line(stats))
            self._stream.flush()

    def close(self) -> None:
        if self._enabled:
            self._stream.write("\n")
            self._stream.flush()


def summary_table(stats: DriverStatistics, results: Sequence[Result]) -> str:
    """The end-of-batch summary printed by ``run`` and ``demo``."""
    turns = [r.turns for r in results]
    failures = NO_TOOL_FAILURES
    for result in results:
        if result.tool_failures.counts:
            failures = failures.merged(result.tool_failures)
    rows = [
        (
            "agents",
            f"{len(results)} ({stats.runs_ok} ok, {stats.runs_failed} failed, "
            f"{stats.runs_cancelled} cancelled)",
        ),
        ("wall time", f"{stats.wall_time:.2f} s"),
        ("model requests", f"{stats.requests} ({stats.attempts} attempts)"),
        ("turns per agent", f"{(sum(turns) / len(turns)) if turns else 0:.2f}"),
        ("TTFT p50 / p95", f"{_ms(stats.ttft.p50)} / {_ms(stats.ttft.p95)}"),
        ("latency p50 / p95", f"{_ms(stats.latency.p50)} / {_ms(stats.latency.p95)}"),
        (
            "prompt tokens",
            f"{stats.prompt_tokens} ({stats.cached_tokens} cached, {_pct(stats.cached_ratio)})",
        ),
        *_cache_by_turn_rows(stats),
        ("completion tokens", str(stats.completion_tokens)),
        (
            "tool calls",
            f"{stats.tool_calls} requested, {stats.tool_executions} executed, "
            f"{failures.total} failed (dedup {_pct(stats.dedup_ratio)})",
        ),
        *([("failed tool calls", failures.describe())] if failures.total else []),
        ("slot utilisation", _pct(stats.slot_utilisation)),
        *_cost_rows(stats),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def _cache_by_turn_rows(stats: DriverStatistics) -> list[tuple[str, str]]:
    """The summary's per-turn cache-hit row (cached / prompt tokens of each turn), when the
    server reported cached tokens."""
    turns = stats.cache_by_turn
    if not turns:
        return []
    last = TURN_BUCKETS - 1
    cells = [f"{t.turn + 1}{'+' if t.turn == last else ''}: {_pct(t.ratio)}" for t in turns[:8]]
    more = " · ..." if len(turns) > 8 else ""
    return [("cached by turn", " · ".join(cells) + more)]


def _usd(value: float | None) -> str:
    return "unknown (no price)" if value is None else f"${value:.4f}"


def _cost_rows(stats: DriverStatistics) -> list[tuple[str, str]]:
    """The summary's cost rows, when the batch kept a cost ledger."""
    cost = stats.cost
    if cost is None:
        return []
    tiers = ", ".join(f"{name} {tokens.requests}" for name, tokens in sorted(cost.tiers.items()))
    rows = [
        ("requests per tier", tiers or "none"),
        ("cost", f"{_usd(cost.cost)} (standard tier: {_usd(cost.standard_cost)})"),
        ("saving vs standard", f"{_usd(cost.savings)} ({_pct(cost.savings_ratio)})"),
    ]
    if cost.flex_attempts:
        rows.append(
            (
                "flex fallback rate",
                f"{_pct(cost.fallback_rate)} ({cost.flex_refused} of {cost.flex_attempts} "
                "refused for capacity, served on standard)",
            )
        )
    if cost.replayed_requests:
        rows.append(
            (
                "replayed answers",
                f"{cost.replayed_requests} from the journals, "
                f"{_usd(cost.replayed_cost)}: billed to the run before the resume, not above",
            )
        )
    if cost.unpriced:
        rows.append(("no price for", ", ".join(cost.unpriced)))
    return rows


def _record_cost(driver: Any, run_id: str) -> RecordCost | None:
    """The cost of the run ``run_id`` from the driver's ledger (``None`` without one)."""
    ledger = driver.cost
    if ledger is None:
        return None
    taken = ledger.take_run(run_id)
    if taken is None:
        return RecordCost(0.0, 0.0, {})
    return RecordCost(taken.usd, taken.standard_usd, dict(taken.requests))


@attrs.frozen
class _JournalPlan:
    """The step journal of an ``agentcore run``: its file, and how it is opened."""

    path: Path
    fresh: bool
    """Empty it first (a run without ``--resume``)."""
    force: bool
    """Empty it if it was written for another task (``--force``)."""
    forget: tuple[int, ...] = ()
    """Inputs to run again from their start (``--retry-failed``)."""


def _forget(journal: SqliteJournal, indices: Sequence[int]) -> None:
    """Forget what the journal holds of these inputs (they run again from their start)."""
    for index in indices:
        journal.forget(job_run_id(journal.batch_id or "", index))


async def _execute(
    task: Task[Any, Any],
    inputs: Sequence[Any],
    indices: Sequence[int],
    *,
    backend: str,
    model: str,
    max_inflight: int,
    out: ResultsFile | None,
    transcripts: bool,
    progress_enabled: bool,
    driver_options: dict[str, Any],
    batch_options: dict[str, Any] | None = None,
    hops_shown: bool = False,
    journal: _JournalPlan | None = None,
) -> tuple[list[Result], DriverStatistics]:
    async with AsyncExitStack() as stack:
        opened = None
        if journal is not None:  # outermost: its last commit follows the batch's end
            opened = await stack.enter_async_context(
                open_step_journal(
                    journal.path,
                    task_description(task),
                    new_batch_id=new_batch_id(),
                    fresh=journal.fresh,
                    force=journal.force,
                )
            )
            _forget(opened, journal.forget)
            resumed = len(opened.runs & {job_run_id(opened.batch_id or "", i) for i in indices})
            if resumed:
                print(f"resuming {resumed} agents from their journaled steps", file=sys.stderr)
        results: list[Result] = []
        progress = _Progress(len(inputs), sys.stderr, progress_enabled)
        options = {"slot_policy": BATCH_SLOT_POLICY, **driver_options}
        async with open_driver(
            backend, model=model, max_inflight=max_inflight, tools=task.tools, **options
        ) as driver:
            async with trio.open_nursery() as nursery:
                if progress_enabled:

                    async def refresh() -> None:
                        while True:
                            progress.show(driver.statistics())
                            await trio.sleep(0.25)

                    nursery.start_soon(refresh)
                if hops_shown:  # a Batch API backend's hops (``--backend openai-batch://``)
                    nursery.start_soon(show_hops, driver, sys.stderr)
                batch_id = new_batch_id() if opened is None else opened.batch_id
                batch_options = dict(batch_options or {})
                if progress.tools is not None and task.tools and "steps" not in batch_options:
                    batch_options["steps"] = progress.tools  # long tools' progress on the line
                async with open_batch(
                    task,
                    inputs,
                    driver=driver,
                    batch_id=batch_id,
                    step_journal=opened,
                    indices=indices,
                    **batch_options,
                ) as stream:
                    async for result in stream:
                        # With a results file, what the summary needs: the output and transcript
                        # are on disk, and a batch of long answers would hold them all in memory.
                        kept = result if out is None else attrs.evolve(result, output=None,
                                                                       transcript=())  # fmt: skip
                        results.append(kept)
                        progress.done += 1
                        progress.failed += result.status != "ok"
                        if out is not None:
                            run_id = job_run_id(batch_id or "", result.index)
                            record = ResultRecord.of_result(
                                result,
                                result.index,
                                transcript=transcripts,
                                cost=_record_cost(driver, run_id),
                            )
                            out.write(record.encode() + b"\n")
                nursery.cancel_scope.cancel()
            stats = driver.statistics()
        progress.show(stats)
        progress.close()
        return results, stats


def _driver_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.stream is not None:
        options["stream"] = args.stream
    if getattr(args, "slot_policy", None) is not None:
        options["slot_policy"] = args.slot_policy
    if getattr(args, "adaptive", False):
        options["adaptive"] = True
    if getattr(args, "service_tier", None) is not None:
        options["service_tier"] = args.service_tier
    if getattr(args, "prices", None) is not None:
        options["prices"] = _read_prices(Path(args.prices))
    if getattr(args, "max_attempts", None) is not None:
        options["retry"] = RetryPolicy(max_attempts=args.max_attempts)
    if getattr(args, "api_key_env", None):
        key = os.environ.get(args.api_key_env)
        if not key:
            raise ConfigError(f"environment variable {args.api_key_env} is not set")
        options["api_key"] = key
    return options


def _read_prices(path: Path) -> Any:
    """The JSON price table of ``--prices`` (checked with the driver's options)."""
    try:
        return orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read --prices {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"--prices {path} is not JSON: {exc}") from None


_MODEL_HELP = "model name sent to the backend (required, except for sim://)"


def _check_run_args(args: argparse.Namespace, options: dict[str, Any]) -> None:
    """Everything a run needs that can be checked without running it (nothing is touched)."""
    max_inflight = args.max_inflight
    if max_inflight < 1:
        raise ConfigError(f"--max-inflight must be a positive integer, got {max_inflight}")
    _require_model(args, options)


def _require_model(args: argparse.Namespace, options: dict[str, Any]) -> None:
    """Check the backend URL and options; without ``--model``, take the backend's own model
    (``sim://`` answers to ``sim``) or stop with one line saying ``--model`` is required."""
    # The backend as the driver will configure it: the same options, split the same way into
    # the driver's and the backend's, and the same key (``--api-key-env``).
    opts = resolve_options(None, options)
    configured = make_backend(
        args.backend, model=args.model or "check", api_key=opts.api_key, **opts.backend_options
    )
    if args.model:
        return
    record = DIALECTS.get(configured.name)
    if record is None or record.default_model is None:
        raise ConfigError(
            f"--model is required with --backend {args.backend}: the model name the server "
            "serves (only sim:// has a default)"
        )
    args.model = record.default_model


def _cmd_run(args: argparse.Namespace) -> int:
    out_path = Path(args.output)
    check_output_path(out_path)
    task = load_task(args.task)
    inputs = read_inputs(Path(args.inputs), task)
    options = _driver_options(args)
    _check_run_args(args, options)
    if args.trace:
        check_output_path(Path(args.trace))
        options["trace"] = args.trace
    if args.retry_failed and args.force:
        raise ConfigError("--retry-failed continues the output; it cannot be combined with --force")
    continued = args.resume or args.retry_failed
    if out_path.exists() and out_path.stat().st_size and not (continued or args.force):
        raise ConfigError(
            f"{out_path} exists: pass --resume to continue it or --force to overwrite it"
        )
    # One process per results file (and journal): taken before anything is changed.
    lock = FileLock(out_path, "results file")
    try:
        return _run_locked(args, task, inputs, out_path, options, lock)
    finally:
        lock.release()


def _run_locked(  # noqa: PLR0917 - one call site
    args: argparse.Namespace,
    task: Task,
    inputs: list[Any],
    out_path: Path,
    options: dict[str, Any],
    lock: FileLock,
) -> int:
    retried: list[int] = []
    if args.retry_failed:
        retried = drop_unfinished(out_path, lock)
        print(f"retrying {len(retried)} failed or cancelled inputs", file=sys.stderr)
        args.resume = True  # and run the inputs not in the output yet, as --resume does
    if args.queue:
        return _run_queued(args, task, inputs, out_path)
    done: set[int] = set()
    if args.resume:
        done, strays = split_resumed(finished_indices(out_path), len(inputs))
        print(f"resuming: {len(done)} of {len(inputs)} inputs already done", file=sys.stderr)
        if strays:
            shown = ", ".join(map(str, strays[:10])) + (" ..." if len(strays) > 10 else "")
            print(
                f"agentcore: warning: {out_path} holds {len(strays)} result(s) for indices "
                f"that are not in {args.inputs} ({shown}); they are kept but not counted",
                file=sys.stderr,
            )
    todo = [i for i in range(len(inputs)) if i not in done]
    if is_batch(args.backend):  # the hops' journal lives beside the results (docs/batch.md)
        options["journal"] = str(journal_path(out_path))
        # A fresh run starts the journal anew, cancelling the batches the old one left running.
        options["replace_journal"] = not args.resume
        settings = (("gather", args.batch_gather), ("poll", args.batch_poll),
                    ("max_enqueued_tokens", args.batch_enqueued_tokens))  # fmt: skip
        options.update({k: v for k, v in settings if v is not None})
        if args.batch_cleanup:
            options["clean_up"] = True
    plan = None
    if not args.no_journal:
        plan = _JournalPlan(
            step_journal_of(out_path),
            fresh=not args.resume,
            force=args.force,
            forget=tuple(i for i in retried if 0 <= i < len(inputs)),
        )
    out = ResultsFile(out_path, "ab" if args.resume else "wb")
    try:
        results, stats = trio.run(
            lambda: _execute(
                task,
                [inputs[i] for i in todo],
                todo,
                backend=args.backend,
                model=args.model,
                max_inflight=args.max_inflight,
                out=out,
                transcripts=args.transcripts,
                progress_enabled=sys.stderr.isatty() and not args.quiet,
                driver_options=options,
                batch_options={"timeout": args.timeout, "max_active": args.max_active},
                hops_shown=is_batch(args.backend) and not args.quiet,
                journal=plan,
            )
        )
    except JournalMismatch as exc:
        raise JournalMismatch(
            f"{exc}; pass --force to run the unfinished inputs from their start"
        ) from None
    finally:
        out.close()
    if not args.quiet:
        print(summary_table(stats, results), file=sys.stderr)
    return EXIT_OK if all(r.status == "ok" for r in results) else EXIT_FAILED


def _run_queued(args: argparse.Namespace, task: Task, inputs: list[Any], out_path: Path) -> int:
    # Distributed: the output file is the batch's durable record; see docs/distributed.md.
    if args.force and out_path.exists() and out_path.stat().st_size:
        raise ConfigError("--force cannot be used with --queue: submit to a new batch name")
    summary, all_ok = run_submitter(
        task,
        inputs,
        out_path,
        args.queue,
        window=args.window,
        progress=sys.stderr.isatty() and not args.quiet,
    )
    if not args.quiet:
        print(summary, file=sys.stderr)
    return EXIT_OK if all_ok else EXIT_FAILED


def _cmd_worker(args: argparse.Namespace) -> int:
    _require_model(args, _driver_options(args))
    options = {
        "backend": args.backend,
        "model": args.model,
        "max_inflight": args.max_inflight,
        "concurrency": args.concurrency,
        "lease": args.lease,
        "max_deliveries": args.max_deliveries,
        "exit_when_done": args.exit_when_done,
        **_driver_options(args),
    }
    return run_worker_command(
        load_task(args.task), args.queue, quiet=args.quiet, worker_options=options
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    _require_model(args, {})
    if args.trace:
        check_output_path(Path(args.trace))
    task = demo_task()
    inputs = demo_inputs(args.agents)
    print(
        f"agentcore demo: {args.agents} research agents on {args.backend} "
        f"({args.max_inflight} inference slots)",
        file=sys.stderr,
    )
    results, stats = trio.run(
        lambda: _execute(
            task,
            inputs,
            list(range(len(inputs))),
            backend=args.backend,
            model=args.model,
            max_inflight=args.max_inflight,
            out=None,
            transcripts=False,
            progress_enabled=sys.stderr.isatty(),
            driver_options={"stream": True, **({"trace": args.trace} if args.trace else {})},
        )
    )
    print(summary_table(stats, results))
    example = next((r for r in results if r.status == "ok"), None)
    if example is not None:
        print(f"\nexample output (input {example.index}):")
        print(orjson.dumps(json_value(example.output), option=orjson.OPT_INDENT_2).decode())
    return EXIT_OK if all(r.status == "ok" for r in results) else EXIT_FAILED


def _str_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in _str_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None


_SIM_KNOBS = (
    ("slots", int, "concurrent engine batch slots"),
    ("scheduling", str, "fifo or priority"),
    ("prefill_us_per_token", float, "prefill time per uncached prompt token (µs)"),
    ("decode_ms_per_token", float, "decode time per output token (ms)"),
    ("block_size", int, "tokens per KV block"),
    ("cache_blocks", int, "prefix-cache capacity in blocks"),
    ("tool_rounds", int, "assistant turns that call tools before answering"),
    ("repeat_share", float, "share of tool calls drawn from a shared argument pool"),
    ("answer_tokens", int, "length of plain answers"),
    ("fail_rate", float, "share of requests answered with an injected 429/500"),
    ("batch_delay", float, "seconds from a batch's creation until it ends"),
    ("batch_delay_max", float, "with it, each batch lasts from --batch-delay to this"),
    ("batch_fail_rate", float, "share of batch lines that fail"),
    ("batch_fail_type", str, "the Anthropic error type of failed batch lines"),
    ("batch_window", float, "seconds a batch may run before it expires (24 h)"),
    ("batch_expire", _int_list, "batches (1, 2... in creation order) that expire, e.g. 3,7"),
    ("batch_enqueued_tokens", int, "OpenAI's enqueued-token limit per model"),
    ("batch_max_requests", int, "most lines per batch (default: the provider's)"),
    ("batch_max_bytes", int, "most bytes per batch (default: the provider's)"),
    ("batch_retention", float, "seconds an Anthropic batch's results can be read (29 days)"),
    ("api_keys", _str_list, "API keys accepted, comma-separated (default: any)"),
    ("models", _str_list, "models served, comma-separated (default: any)"),
    ("flex_refuse_rate", float, "share of flex requests refused for capacity"),
    ("speedup", float, "divide all simulated time by this"),
    ("seed", int, "seed of the simulated model"),
)


def _cmd_trace(args: argparse.Namespace) -> int:
    out = Path(args.output)
    check_output_path(out)
    render_timeline(args.trace, out)
    print(f"agentcore: wrote {out}", file=sys.stderr)
    return EXIT_OK


def _cmd_sim(args: argparse.Namespace) -> int:
    knobs = {n: getattr(args, n) for n, _, _ in _SIM_KNOBS if getattr(args, n) is not None}
    if args.ignore_stream:
        knobs["ignore_stream"] = True
    run_sim_server(args.host, args.port, SimConfig(**knobs))
    return EXIT_OK


T = TypeVar("T")


def _number(kind: Callable[[str], T], text: str, what: str) -> T:
    """``text`` read as ``kind`` (an argument's type), or the error naming ``what`` it is not."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _positive_int(text: str) -> int:
    value = _number(int, text, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = _number(float, text, "a number")
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


_ATTEMPTS_HELP = (
    "attempts per model request, the first included (default 6: transient errors are retried "
    "with back-off; 1: never retry)"
)


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    """A command whose help ends with the exit codes."""
    return sub.add_parser(
        name, help=help_text, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _backend_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose the backend and how requests reach it, alike for ``run`` and
    ``worker``."""
    group = parser.add_argument_group("backend")
    group.add_argument("--backend", default="sim://", help="backend URL (default: sim://)")
    group.add_argument("--model", help=_MODEL_HELP)
    group.add_argument("--max-inflight", type=int, default=32, help="inference slots")
    group.add_argument("--api-key-env", help="environment variable holding the API key")
    group.add_argument("--max-attempts", type=_positive_int, default=None, help=_ATTEMPTS_HELP)
    group.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stream replies (default: the backend's default)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentcore",
        description="Run many tool-using LLM agents against one inference backend.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = _command(sub, "run", "run a task over a JSONL file of inputs")
    run.add_argument("task", help="the task file (TOML)")
    run.add_argument("inputs", help="inputs, one JSON value per line")
    run.add_argument("-o", "--output", required=True, help="results file (JSONL, appended)")
    _backend_arguments(run)
    run.add_argument("--resume", action="store_true", help="skip inputs already in the output")
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="run failed and cancelled inputs again, replacing their lines (implies --resume)",
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing output; with --resume, run the unfinished inputs from their "
        "start if the journal was written for another task",
    )
    run.add_argument(
        "--no-journal",
        action="store_true",
        help="keep no step journal (a resumed run then starts each unfinished input afresh)",
    )
    run.add_argument("--transcripts", action="store_true", help="include transcripts")
    run.add_argument(
        "--slot-policy",
        choices=get_args(SlotPolicy),
        default=None,
        help="order of waiting model requests (default: priority, near-done agents first; "
        "attained: the least served agents first)",
    )
    run.add_argument(
        "--adaptive",
        action="store_true",
        help="shrink the slot limit when the server signals overload, grow it back on success",
    )
    run.add_argument(
        "--max-active",
        type=_positive_int,
        default=None,
        help="agents in progress at once (default: all; bounds memory for huge batches)",
    )
    run.add_argument(
        "--timeout",
        type=_positive_float,
        default=None,
        help="seconds each agent may take (default: no limit)",
    )
    run.add_argument(
        "--service-tier",
        choices=get_args(ServiceTier),
        default=None,
        help="hosted APIs' service tier: flex at batch prices, or flex falling back to "
        "standard on a capacity refusal (docs/batch.md)",
    )
    run.add_argument(
        "--prices",
        help="JSON price table overriding the defaults: {model: {tier: {input, output, "
        "cached_input}}}, USD per million tokens",
    )
    batch_api = run.add_argument_group("Batch API backends (openai-batch://, anthropic-batch://)")
    batch_api.add_argument(
        "--batch-poll",
        type=_positive_float,
        help="seconds before a hop's first poll (default 5; later polls back off up to a minute)",
    )
    batch_api.add_argument(
        "--batch-gather",
        type=_positive_float,
        help="seconds without a new model call before a hop is submitted (default 1)",
    )
    batch_api.add_argument(
        "--batch-enqueued-tokens",
        type=_positive_int,
        help="the provider's limit on prompt tokens in batches not yet ended, per model "
        "(OpenAI's enqueued-token limit): hops are packed and held to stay under it",
    )
    batch_api.add_argument(
        "--batch-cleanup",
        action="store_true",
        help="delete each ended hop's files (OpenAI) or batch (Anthropic) at the provider once "
        "its results are in the journal (default: keep them)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    run.add_argument(
        "--trace", help="write the batch's timeline (Chrome trace JSON) to this file as it runs"
    )
    run.add_argument(
        "--queue",
        help="submit to a distributed batch (redis://HOST:PORT/BATCH) run by `agentcore worker`",
    )
    run.add_argument(
        "--window", type=int, default=1000, help="with --queue: agents live at once (1000)"
    )
    run.set_defaults(handler=_cmd_run)

    worker = _command(sub, "worker", "run the steps of a distributed batch (docs/distributed.md)")
    worker.add_argument("task", help="the batch's task file (TOML)")
    worker.add_argument("--queue", required=True, help="redis://HOST:PORT/BATCH")
    _backend_arguments(worker)
    worker.add_argument("--concurrency", type=int, help="steps at once (2 x max-inflight)")
    worker.add_argument("--lease", type=float, default=30.0, help="lease in seconds (30)")
    worker.add_argument("--max-deliveries", type=int, default=5, help="before dead-letter (5)")
    worker.add_argument(
        "--exit-when-done", action="store_true", help="exit once the batch is finished"
    )
    worker.add_argument("-q", "--quiet", action="store_true", help="no statistics at exit")
    worker.set_defaults(handler=_cmd_worker)

    demo = sub.add_parser("demo", help="run a demo batch on the embedded simulated backend")
    demo.add_argument("--agents", type=int, default=200, help="number of agents (200)")
    demo.add_argument("--max-inflight", type=int, default=32, help="inference slots (32)")
    demo.add_argument("--backend", default="sim://", help="backend URL (default: sim://)")
    demo.add_argument("--model", help=_MODEL_HELP)
    demo.add_argument("--trace", help="write the batch's timeline (Chrome trace JSON) here")
    demo.set_defaults(handler=_cmd_demo)

    trace = sub.add_parser(
        "trace", help="render a --trace file as a self-contained SVG or HTML timeline"
    )
    trace.add_argument("trace", help="the trace file written by --trace")
    trace.add_argument("-o", "--output", required=True, help="timeline.svg or timeline.html")
    trace.set_defaults(handler=_cmd_trace)

    sim = sub.add_parser("sim", help="serve the simulated OpenAI-compatible backend")
    sim.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    sim.add_argument("--port", type=int, default=8000, help="port (8000)")
    for name, kind, text in _SIM_KNOBS:
        sim.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=text)
    sim.add_argument(
        "--ignore-stream",
        action="store_true",
        help="answer streamed requests with one JSON reply (as some proxies do)",
    )
    sim.set_defaults(handler=_cmd_sim)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentcore`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        with cli_logging(progress=args.command == "worker" and not args.quiet):
            code: int = args.handler(args)
    except (TaskFileError, InputFileError, ConfigError, JournalError) as exc:
        print(f"agentcore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BaseException as exc:
        # Ctrl-C, and a configuration error found inside the batch's nursery (the warm-up
        # failing for good), reach us wrapped in the exception groups of the nurseries.
        if interrupted(exc):
            print("\nagentcore: interrupted; finished results are in the output", file=sys.stderr)
            return EXIT_INTERRUPTED
        single = _only_config_error(exc) if isinstance(exc, BaseExceptionGroup) else None
        if single is None:
            raise
        print(f"agentcore: error: {single}", file=sys.stderr)
        return EXIT_USAGE
    return code


def _only_config_error(
    group: BaseExceptionGroup[BaseException],
) -> ConfigError | JournalError | None:
    while len(group.exceptions) == 1 and isinstance(group.exceptions[0], BaseExceptionGroup):
        group = group.exceptions[0]
    if len(group.exceptions) == 1 and isinstance(group.exceptions[0], ConfigError | JournalError):
        return group.exceptions[0]
    return None


if __name__ == "__main__":
    sys.exit(main())
