"""One agent, one question: the interactive surface over tasks and the driver.

An :class:`Agent` is a frozen value (instructions, tools, output type, budgets) that runs one
input at a time on an open driver, plainly (:meth:`Agent.run`) or with its step events as they
happen (:meth:`Agent.watch`). It compiles to the same loop as a one-input batch of a
:class:`~agentcore.Task` whose prompt is the input, so everything a batch gets (slots,
retries, coalescing, the byte-identical prefix) applies; many agents may run at once on one
driver.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Generic, cast

import attrs
import trio

from .._core.budgets import UsageLimits
from .._core.config import TruncatedPolicy
from .._core.errors import ConfigError
from .._core.loop import AgentLoop
from .._core.messages import ModelParams
from .._core.results import Result
from .._driver.driver import Driver
from .._driver.journaling import encode_result
from .._observe.steps import StepStream
from .._tools.spec import ToolBase
from .fingerprint import task_description
from .journal import open_step_journal
from .resume import restore
from .task import AUTO, Deps_contra, T, Task, compile_job

__all__ = ["Agent"]

_runs = itertools.count()


def _tools_tuple(tools: Iterable[ToolBase[Deps_contra]]) -> tuple[ToolBase[Deps_contra], ...]:
    return tuple(tools)


@attrs.frozen
class Agent(Generic[T, Deps_contra]):
    """An agent: instructions, tools, an output type and budgets; run it on a driver.

    ::

        agent = agentcore.Agent(instructions="You are a calculator.", tools=[add])
        async with agentcore.open_driver("sim://", tools=agent.tools) as driver:
            result = await agent.run("What is 2 + 3?", driver=driver)

    ``Agent[T, Deps]`` is generic over its output type and its ``deps``, as
    :class:`~agentcore.Task` is: ``Agent(output=Answer).run(...)`` gives a
    ``Result[Answer]``; an agent without ``output`` is an ``Agent[str]``; an agent whose
    tools take ``RunContext[Approvals]`` is an ``Agent[..., Approvals]``, and
    ``agent.run(q, driver=d, deps=42)`` does not type-check. Every field but
    ``instructions`` (the task's ``system``) has the meaning of the :class:`~agentcore.Task`
    field of its name: the agent is a task whose prompt is the input (:attr:`task`).

    Args:
        instructions: the system prompt.
        tools: tools the model may call (the driver must be opened with them).
        output: the type the answer must structure into (``None``: text).
        max_turns: tool turns before the model is asked for its final answer.
        max_tool_errors: invalid tool calls tolerated.
        max_output_retries: repair turns for an answer that does not fit ``output``.
        max_tool_failures: failed tool calls (raised or timed out) tolerated; one more ends
            the run ``failed`` (``None``: no limit).
        params: sampling parameters of every request.
        expected_output_tokens: expected reply length, passed to the server as a hint.
        final_instruction: the user message of the request forced once ``max_turns`` tool
            turns are spent (``"auto"``: the default instruction where it is needed, see
            :attr:`~agentcore.Task.final_instruction`; ``None``: that request only withholds
            tools).
        announce_output: whether the system prompt ends with the output's JSON schema
            (``"auto"``: where an answer could come unconstrained, see
            :attr:`~agentcore.Task.announce_output`).
        on_truncated: what a final answer cut by the token limit earns.
        limits: usage budgets of each run (:class:`~agentcore.UsageLimits`).
        name: a short name, used in run ids.
        planning_interval: ask for a plan before the first tool turn and after every this
            many tool turns (``None``: never).
    """

    instructions: str = ""
    tools: tuple[ToolBase[Deps_contra], ...] = attrs.field(default=(), converter=_tools_tuple)
    output: type[T] | None = None
    max_turns: int = 6
    max_tool_errors: int = 3
    max_output_retries: int = 2
    max_tool_failures: int | None = None
    params: ModelParams = ModelParams()
    expected_output_tokens: int | None = None
    final_instruction: str | None = AUTO
    announce_output: bool | str = AUTO
    on_truncated: TruncatedPolicy = "repair"
    limits: UsageLimits | None = None
    name: str = "agent"
    planning_interval: int | None = None
    _task: Task[T, Deps_contra] = attrs.field(init=False, eq=False, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # Every field but ``instructions`` is the task's field of its name; the task validates
        # every field once, with its own checks.
        same = {
            f.name: getattr(self, f.name)
            for f in attrs.fields(type(self))
            if f.init and f.name != "instructions"
        }
        task: Task[T, Deps_contra] = Task(prompt="{input}", system=self.instructions, **same)
        object.__setattr__(self, "_task", task)

    @property
    def task(self) -> Task[T, Deps_contra]:
        """The :class:`~agentcore.Task` this agent runs (its prompt is the input): for a batch
        of the same agent, ``run_batch(agent.task, prompts, ...)``."""
        return self._task

    def loop(
        self, prompt: str, *, run_id: str | None = None, driver: Driver | None = None
    ) -> AgentLoop:
        """The agent loop for one prompt (for drivers of your own, or ``Driver.run``).

        ``driver``: the driver it will run on, whose backends decide whether the default
        final instruction is needed (:attr:`~agentcore.Task.final_instruction`); without
        one it is.
        """
        if not isinstance(prompt, str):
            raise ConfigError(f"the prompt must be a string, got {prompt!r}")
        rid = f"{self.name}-{next(_runs)}" if run_id is None else run_id
        schema_on_final = driver is not None and driver.schema_on_final
        return compile_job(
            self._task, {"input": prompt}, run_id=rid, schema_on_final=schema_on_final
        )

    def _check(self, driver: Driver) -> None:
        if not isinstance(driver, Driver):
            raise ConfigError(f"driver must be an open agentcore Driver, got {driver!r}")
        known = driver.executor.tools
        missing = [t.name for t in self.tools if known.get(t.name) is not t]
        if missing:
            raise ConfigError(
                f"the driver was not opened with this agent's tools {missing}: "
                "open it with tools=agent.tools"
            )

    async def run(
        self,
        prompt: str,
        *,
        driver: Driver,
        deadline: float | None = None,
        run_id: str | None = None,
        deps: Deps_contra | None = None,
        step_journal: str | os.PathLike[str] | None = None,
    ) -> Result[T]:
        """Run the agent on ``prompt`` to its end.

        ::

            result = await agent.run(question, driver=driver, step_journal="runs.journal",
                                     run_id="ticket-4711")

        Args:
            prompt: the user's message.
            driver: an open driver (with this agent's tools).
            deadline: trio time after which the run ends with a ``failed`` result.
            run_id: the run's id (default: ``<name>-<n>``); required with ``step_journal``,
                where it names the run.
            deps: any object, handed to this run's tools that take a
                :class:`~agentcore.RunContext` (``ctx.deps``; ``None``: the driver's): the
                per-request context of a service sharing one driver.
            step_journal: a file (SQLite) where the run's steps are journaled. Run again
                with the same ``run_id`` and prompt after the process was killed, the run
                resumes at its last journaled step (its journaled replies are not requested
                again, its journaled tool results not computed again); a run that had ended
                returns its result without running. The file is held by one run at a time
                (:class:`~agentcore.JournalLocked` otherwise). docs/batch.md, "Resuming from
                the last step".

        Returns:
            The :class:`~agentcore.Result` (``result.output`` on success).

        Raises:
            ConfigError: the driver lacks the agent's tools, the prompt is not text, or
                ``step_journal`` was given without ``run_id``.
            JournalError: the journal is held by another run, was written for another agent
                (:class:`~agentcore.JournalMismatch`), or cannot be written.
        """
        self._check(driver)
        loop = self.loop(prompt, run_id=run_id, driver=driver)
        if step_journal is None:
            return cast("Result[T]", await driver.run(loop, deadline=deadline, deps=deps))
        if run_id is None:
            raise ConfigError(
                "step_journal= needs run_id=: the name of the run in the journal, the same "
                "when it is resumed"
            )
        async with open_step_journal(step_journal, task_description(self._task)) as journal:
            journaled = journal.take(run_id)
            where = f"{journal.path}, run {run_id}"
            restored = restore(loop, journaled, 0, self.output, where, trio.current_time())
            if isinstance(restored, Result):
                if journaled.result is None:
                    await journal.ended(run_id, encode_result(restored))
                return cast("Result[T]", restored)
            # The driver's own ``run`` takes no journal: the step journal is this layer's.
            result = await driver._runner.run(restored, 0, deadline, deps=deps, journal=journal)
            return cast("Result[T]", result)

    @asynccontextmanager
    async def watch(
        self,
        prompt: str,
        *,
        driver: Driver,
        deltas: bool = False,
        buffer: int = 64,
        deadline: float | None = None,
        run_id: str | None = None,
        deps: Deps_contra | None = None,
    ) -> AsyncIterator[StepStream]:
        """Run the agent on ``prompt`` and receive its step events as they happen.

        ::

            async with agent.watch("What is 2 + 3?", driver=driver, deltas=True) as steps:
                async for step in steps:
                    print(step.name)
            print(steps.result.output)

        See :meth:`Driver.watch` for ordering and back-pressure; leaving the block before the
        last event cancels the run. ``deps`` is as for :meth:`run`.
        """
        self._check(driver)
        loop = self.loop(prompt, run_id=run_id, driver=driver)
        async with driver.watch(
            loop, deltas=deltas, buffer=buffer, deadline=deadline, deps=deps
        ) as steps:
            yield steps
