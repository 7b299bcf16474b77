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
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import attrs

from .._core.errors import ConfigError
from .._core.loop import AgentLoop
from .._core.messages import ModelParams
from .._core.results import Result
from .._driver.driver import Driver
from .._observe.steps import StepStream
from .._tools.spec import Tool
from .task import Task, compile_job

__all__ = ["Agent"]

_runs = itertools.count()


def _tools_tuple(tools: Iterable[Tool[..., Any]]) -> tuple[Tool[..., Any], ...]:
    return tuple(tools)


@attrs.frozen
class Agent:
    """An agent: instructions, tools, an output type and budgets; run it on a driver.

    ::

        agent = agentcore.Agent(instructions="You are a calculator.", tools=[add])
        async with agentcore.open_driver("sim://", tools=agent.tools) as driver:
            result = await agent.run("What is 2 + 3?", driver=driver)

    Args:
        instructions: the system prompt.
        tools: tools the model may call (the driver must be opened with them).
        output: the type the answer must structure into (``None``: text).
        max_turns: tool turns before the model is asked for its final answer.
        max_tool_errors: invalid tool calls tolerated.
        max_output_retries: repair turns for an answer that does not fit ``output``.
        params: sampling parameters of every request.
        name: a short name, used in run ids.
        planning_interval: ask for a plan before the first tool turn and after every this
            many tool turns (``None``: never).
    """

    instructions: str = ""
    tools: tuple[Tool[..., Any], ...] = attrs.field(default=(), converter=_tools_tuple)
    output: Any = None
    max_turns: int = 6
    max_tool_errors: int = 3
    max_output_retries: int = 2
    params: ModelParams = ModelParams()
    name: str = "agent"
    planning_interval: int | None = None
    _task: Task = attrs.field(init=False, eq=False, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # The task validates tools, budgets and the output type once, with its own checks.
        task = Task(
            prompt="{input}",
            system=self.instructions,
            tools=self.tools,
            output=self.output,
            max_turns=self.max_turns,
            max_tool_errors=self.max_tool_errors,
            max_output_retries=self.max_output_retries,
            params=self.params,
            name=self.name,
            planning_interval=self.planning_interval,
        )
        object.__setattr__(self, "_task", task)

    def loop(self, prompt: str, *, run_id: str | None = None) -> AgentLoop:
        """The agent loop for one prompt (for drivers of your own, or ``Driver.run``)."""
        if not isinstance(prompt, str):
            raise ConfigError(f"the prompt must be a string, got {prompt!r}")
        rid = f"{self.name}-{next(_runs)}" if run_id is None else run_id
        return compile_job(self._task, {"input": prompt}, run_id=rid)

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
    ) -> Result:
        """Run the agent on ``prompt`` to its end.

        Args:
            prompt: the user's message.
            driver: an open driver (with this agent's tools).
            deadline: trio time after which the run ends with a ``failed`` result.
            run_id: the run's id (default: ``<name>-<n>``).

        Returns:
            The :class:`~agentcore.Result` (``result.output`` on success).

        Raises:
            ConfigError: the driver lacks the agent's tools, or the prompt is not text.
        """
        self._check(driver)
        return await driver.run(self.loop(prompt, run_id=run_id), deadline=deadline)

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
    ) -> AsyncIterator[StepStream]:
        """Run the agent on ``prompt`` and receive its step events as they happen.

        ::

            async with agent.watch("What is 2 + 3?", driver=driver, deltas=True) as steps:
                async for step in steps:
                    print(step.name)
            print(steps.result.output)

        See :meth:`Driver.watch` for ordering and back-pressure; leaving the block before the
        last event cancels the run.
        """
        self._check(driver)
        loop = self.loop(prompt, run_id=run_id)
        async with driver.watch(loop, deltas=deltas, buffer=buffer, deadline=deadline) as steps:
            yield steps
