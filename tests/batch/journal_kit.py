"""A deterministic batch for the step-journal tests: a scripted model and a tool that count
what they computed, and a way to kill a batch (lose what its journal had not committed).

Agent ``i`` makes ``1 + i % 3`` tool turns (one or two calls each), then answers with the
tool results it saw; the tool answers from its arguments after ``tool_latency`` seconds. The
model counts its requests by request id and the tool its executions by idempotency key, so a
test sees what was computed twice.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import trio

import agentcore
from agentcore import Result, RunContext, Task
from agentcore._tasks.fingerprint import task_description
from agentcore._tasks.journal import SqliteJournal, open_step_journal
from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage
from agentcore.testing import ScriptedModel


def tool_turns(index: int) -> int:
    return 1 + index % 3


def steps_of(index: int) -> int:
    """The replies and tool outcomes agent ``index`` journals."""
    turns = tool_turns(index)
    return turns + 1 + sum(1 + (index + t) % 2 for t in range(turns))


class World:
    """The model, the tool, the task and the counters of one test."""

    def __init__(
        self,
        agents: int,
        *,
        model_latency: float = 1.0,
        tool_latency: float = 0.5,
        max_inflight: int = 4,
    ) -> None:
        self.agents = agents
        self.max_inflight = max_inflight
        self.audit: Path | None = None
        """A journal to check against: every tool runs after the reply that asked for it is
        durable there, every request after the outcomes it carries are."""
        self.early: list[str] = []
        """What ran before the step it follows was durable in ``audit``."""
        self.requests: collections.Counter[str] = collections.Counter()
        self.executions: collections.Counter[str] = collections.Counter()
        self.model = ScriptedModel(self._reply, latency=model_latency)
        latency = tool_latency
        executions = self.executions

        @agentcore.tool
        async def lookup(ctx: RunContext, term: str) -> str:
            """Look a term up. Args: term: what to look up."""
            executions[ctx.idempotency_key] += 1
            run, turn, _ = ctx.idempotency_key.split("/")
            self._check(f"{run}/{turn}", "")
            await trio.sleep(latency)
            return f"found {term}"

        self.tool = lookup
        self.task: Task[str] = Task(
            system="You look things up.", prompt="Agent {input}", tools=[lookup], max_turns=4
        )
        self.inputs = list(range(agents))

    def _check(self, request_id: str, key: str) -> None:
        """Note it unless the reply ``request_id`` (``key`` empty) or the tool outcome
        ``key`` is committed in the audited journal."""
        if self.audit is None:
            return
        conn = sqlite3.connect(f"file:{self.audit}?mode=ro", uri=True)
        try:
            run = request_id.rpartition("/")[0]
            rows = conn.execute("SELECT key, data FROM steps WHERE run = ?", (run,)).fetchall()
            ended = conn.execute("SELECT 1 FROM ends WHERE run = ?", (run,)).fetchall()
        finally:
            conn.close()
        if ended:
            return
        if key:
            found = any(k == key for k, _ in rows)
        else:
            found = any(not k and orjson.loads(d)["request_id"] == request_id for k, d in rows)
        if not found:
            self.early.append(key or request_id)

    def _reply(self, call: CallModel) -> AssistantMessage | str:
        self.requests[call.request_id] += 1
        run_id, _, turn_text = call.request_id.rpartition("/")
        index, turn = int(run_id.rpartition("-")[2]), int(turn_text)
        if turn > 0 and turn <= tool_turns(index):
            for j in range(1 + (index + turn - 1) % 2):
                self._check(call.request_id, f"{run_id}/{turn - 1}/{j}")
        if turn < tool_turns(index):
            calls = [
                ToolCall(
                    f"c{turn}_{j}",
                    "lookup",
                    orjson.dumps({"term": f"a{index}t{turn}c{j}"}).decode(),
                )
                for j in range(1 + (index + turn) % 2)
            ]
            return AssistantMessage(tool_calls=calls)
        seen = [m.content for m in call.messages if isinstance(m, ToolMessage)]
        return f"agent {index}: " + "; ".join(seen)

    def needed(self) -> tuple[int, int]:
        """Model requests and tool executions of one uninterrupted run of the batch."""
        requests = sum(tool_turns(i) + 1 for i in self.inputs)
        tools = sum(1 + (i + t) % 2 for i in self.inputs for t in range(tool_turns(i)))
        return requests, tools

    async def run(self, journal: SqliteJournal | None = None, **options: Any) -> list[Result]:
        """The batch on the scripted model, results as they come, until done or cancelled."""
        results: list[Result] = []
        async with (
            agentcore.open_driver(
                self.model, tools=[self.tool], max_inflight=self.max_inflight
            ) as driver,
            agentcore.open_batch(
                self.task, self.inputs, driver=driver, step_journal=journal, **options
            ) as stream,
        ):
            async for result in stream:
                results.append(result)
        return results


async def run_journaled(world: World, path: Path) -> list[Result]:
    """``world``'s batch on the journal at ``path``, its commits on the event loop (virtual
    time: a commit in a thread would let the clock jump)."""
    description = task_description(world.task)
    async with open_step_journal(path, description, new_batch_id="b", threads=False) as journal:
        return await world.run(journal)


async def run_killed(
    world: World, path: Path, after: float | None, delivered: dict[int, Result]
) -> bool:
    """Run ``world``'s batch on the journal at ``path``, killed after ``after`` seconds
    (``None``: never): everything the journal had not committed then is lost, as with a
    SIGKILL. Results delivered before go into ``delivered``. Returns whether it was killed."""
    description = task_description(world.task)
    async with open_step_journal(path, description, new_batch_id="b", threads=False) as journal:
        with trio.move_on_after(float("inf") if after is None else after) as scope:
            async with (
                agentcore.open_driver(
                    world.model, tools=[world.tool], max_inflight=world.max_inflight
                ) as driver,
                agentcore.open_batch(
                    world.task, world.inputs, driver=driver, step_journal=journal
                ) as stream,
            ):
                async for result in stream:
                    delivered[result.index] = result
        if scope.cancelled_caught:
            journal._abandon()
            return True
    return False


def same_runs(got: Sequence[Result], reference: Sequence[Result]) -> list[int]:
    """The indices whose result differs from the reference in anything but timings."""

    def key(result: Result) -> tuple[Any, ...]:
        return (result.index, result.status, result.output, result.transcript, result.usage,
                result.turns, result.error)  # fmt: skip

    mine = {r.index: key(r) for r in got}
    return [r.index for r in reference if mine.get(r.index) != key(r)]
