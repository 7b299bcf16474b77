"""A batch's usage budget, enforced by the driver over the runs of one ``Driver.stream``.

Theory of operation
-------------------
A :class:`BudgetGuard` wraps the pure :class:`~agentcore._core.budgets.BatchLedger` of one
batch. The driver counts every model request of the batch's runs when it starts and its
tokens when it ends, and every tool call when it starts. Before starting a new run, the
driver asks :meth:`BudgetGuard.refuses_run`: once a budget has no room, no run starts (each
remaining input reports a ``failed`` result with ``AbortKind.BUDGET_EXHAUSTED``).

What happens to the runs already going is the user's choice (``on_budget``):

- ``"finish"``: they go on to their end; the batch may pass its limits by what they use;
- ``"cancel"``: every request and tool call is checked before it starts, and the first one
  without room (or a request whose tokens exhaust a token budget) cancels every run of the
  batch at once. Each reports ``failed`` with the budget as its reason.
"""

from __future__ import annotations

from typing import Literal

import trio

from .._core.budgets import BatchLedger, BudgetExceeded, UsageLimits
from .._core.events import ModelFailed, ModelResponded
from .._core.validators import check_choice
from .runs import Group

__all__ = ["BudgetGuard", "OnBudget"]

OnBudget = Literal["finish", "cancel"]
"""What a spent batch budget does to the runs already going."""


class BudgetGuard:
    """Counts one batch's usage and stops the batch when a budget runs out."""

    __slots__ = ("_cancel", "_group", "ledger")

    def __init__(self, limits: UsageLimits, on_budget: OnBudget, group: Group) -> None:
        check_choice("on_budget", on_budget, ("finish", "cancel"))
        self.ledger = BatchLedger(limits)
        self._cancel = on_budget == "cancel"
        self._group = group

    def refuses_run(self) -> BudgetExceeded | None:
        """The budget without room for a new run, if any."""
        return self.ledger.check_run()

    async def before_request(self) -> None:
        """Count a request about to start; in ``cancel`` mode, refuse it without room.

        Raises:
            trio.Cancelled: the budget had no room, so the batch's runs were cancelled.
        """
        if self._cancel:
            over = self.ledger.check_request()
            if over is not None:
                await self._stop(over)
        self.ledger.start_request()

    def after_request(self, event: ModelResponded | ModelFailed) -> None:
        """Count the tokens of a request that ended."""
        if isinstance(event, ModelResponded):
            self.ledger.end_request(event.usage)
            if self._cancel:
                over = self.ledger.check_request()
                # A spent count budget only refuses the next request; spent tokens stop now.
                if over is not None and over.budget.value.endswith("tokens"):
                    self._cancel_runs(over)

    async def before_tool_call(self) -> None:
        """Count a tool call about to start; in ``cancel`` mode, refuse it without room.

        Raises:
            trio.Cancelled: the budget had no room, so the batch's runs were cancelled.
        """
        if self._cancel:
            over = self.ledger.check_tool_call()
            if over is not None:
                await self._stop(over)
        self.ledger.start_tool_call()

    def _cancel_runs(self, over: BudgetExceeded) -> None:
        for run in list(self._group.runs):
            if run.budget is None:
                run.budget = over
            run.cancel()

    async def _stop(self, over: BudgetExceeded) -> None:
        self._cancel_runs(over)
        await trio.lowlevel.checkpoint()  # the caller's run is cancelled: this raises
