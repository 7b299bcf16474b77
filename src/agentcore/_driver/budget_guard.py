"""A batch's usage budget, enforced by the driver over the runs of one ``Driver.stream``.

Theory of operation
-------------------
A :class:`BudgetGuard` wraps the pure :class:`~agentcore._core.budgets.BatchLedger` of one
batch. Before any request of the batch's runs is sent, the guard *reserves* its tokens: an
estimate of its prompt (the batch's own
:class:`~agentcore._core.token_estimate.TokenEstimator`, the one the rate budget uses: linear
in the prompt's text, framing, tool specs and images, fitted to its replies' usage) and, for
its reply, its ``max_tokens`` when set, else the batch's running mean of
completion tokens (256 to begin with). The request is sent only if the tokens used, plus those
reserved by the batch's requests in flight, plus this reservation fit every token budget (and
the request count its budget); when it ends, its reservation gives way to the tokens its reply
reports. So a batch passes a token limit only by what its requests in flight use beyond their
reservations: never for output tokens when ``max_tokens`` is set, and by the error of the
prompt estimate for input tokens. Every tool call is counted when it starts, and one starts
only while the count is below the tool-call limit (:meth:`BudgetGuard.before_tool_call`).
Before starting a new run, the driver asks :meth:`BudgetGuard.refuses_run`: once a budget has
no room, no run starts (each remaining input reports a ``failed`` result with
``AbortKind.BUDGET_EXHAUSTED``).

A request that does not fit beside the reservations of requests in flight waits (holding its
slot) until one of them ends, and is checked again with what it really used. A request that
does not fit with nothing else in flight, or past the request count, is refused and never
sent. What a refusal does is the user's choice (``on_budget``):

- ``"finish"``: the run that wanted to send it ends ``failed`` with the budget as its reason;
  the other runs go on, each request of theirs reserved the same way, so requests in flight
  finish and their replies are kept. A tool call without room is not run: its run's loop gets
  a ``ToolFailed`` carrying the budget, which the model sees as the call's result, and the
  run's next request is its final one (no tools), so the agent still answers with what it has;
- ``"cancel"``: the first request or tool call without room (or a reply whose tokens spend a
  token budget) cancels every run of the batch at once. Each reports ``failed`` with the
  budget as its reason.
"""

from __future__ import annotations

import math
from typing import Literal

import trio

from .._core.budgets import BatchLedger, Budget, BudgetExceeded, UsageLimits
from .._core.events import CallModel, CallTool, ModelFailed, ModelResponded, ToolError, ToolFailed
from .._core.token_estimate import Features, TokenEstimator, prompt_features
from .._core.validators import check_choice
from .runs import Group, Run

__all__ = ["BudgetGuard", "OnBudget"]

OnBudget = Literal["finish", "cancel"]
"""What a spent batch budget does to the runs already going."""


class BudgetGuard:
    """Counts one batch's usage and stops what would pass its budget."""

    __slots__ = ("_cancel", "_estimator", "_group", "_held", "_settled", "ledger")

    def __init__(self, limits: UsageLimits, on_budget: OnBudget, group: Group) -> None:
        check_choice("on_budget", on_budget, ("finish", "cancel"))
        self.ledger = BatchLedger(limits)
        self._cancel = on_budget == "cancel"
        self._group = group
        self._estimator = TokenEstimator()
        self._held: dict[str, tuple[int, int, Features, int | None]] = {}
        """Per request in flight (by request id): its reservation, its prompt's features and
        its ``max_tokens``. Bounded by the requests of the batch in flight."""
        self._settled = trio.lowlevel.ParkingLot()
        """Requests that did not fit beside those in flight, waiting for one to end."""

    def refuses_run(self) -> BudgetExceeded | None:
        """The budget without room for a new run, if any."""
        return self.ledger.check_run()

    def reservation(self, call: CallModel) -> tuple[int, int, Features, int | None]:
        """The input and output tokens ``call`` reserves, its prompt's features and its
        ``max_tokens``."""
        features = prompt_features(call)
        estimator = self._estimator
        max_tokens = call.params.max_tokens
        output = max_tokens if max_tokens is not None else math.ceil(estimator.completion)
        return estimator.reserve(features), output, features, max_tokens

    async def before_request(self, run: Run, call: CallModel) -> None:
        """Reserve the tokens of a request about to be sent (its retries included), or stop.

        A request that does not fit beside the reservations of requests in flight waits for
        one of them to end (they may use less than they reserved) and is checked again; one
        that does not fit with nothing else in flight, or past the request count, is refused.

        Raises:
            trio.Cancelled: the request was refused: ``run`` (``"finish"``) or every run of
                the batch (``"cancel"``) was cancelled with the budget as its reason.
        """
        while True:
            held = self.reservation(call)
            over = self.ledger.reserve(held[0], held[1])
            if over is None:
                self._held[call.request_id] = held
                return
            if over.budget is Budget.REQUESTS or not self._held:
                break
            await self._settled.park()  # a request in flight ended: its tokens are known
        if self._cancel:
            self._cancel_runs(over)
        else:
            if run.budget is None:
                run.budget = over
            run.cancel()
        await trio.lowlevel.checkpoint()  # the run is cancelled: this raises

    def after_request(self, event: ModelResponded | ModelFailed) -> None:
        """Replace a request's reservation by the tokens its reply used."""
        held = self._held.pop(event.request_id, None)
        if held is None:
            return
        usage = event.usage if isinstance(event, ModelResponded) else None
        self.ledger.settle(held[0], held[1], usage)
        self._settled.unpark_all()
        if usage is not None:
            self._estimator.learn(held[2], usage.prompt_tokens, usage.completion_tokens, held[3])
            if self._cancel:
                over = self.ledger.check_request()
                # A spent count budget only refuses the next request; spent tokens stop now.
                if over is not None and over.budget.value.endswith("tokens"):
                    self._cancel_runs(over)

    def release(self, call: CallModel) -> None:
        """Give back the reservation of a request that ended without a reply (its run was
        cancelled while it waited or was in flight)."""
        held = self._held.pop(call.request_id, None)
        if held is not None:
            self.ledger.settle(held[0], held[1], None)
            self._settled.unpark_all()

    async def before_tool_call(self, call: CallTool) -> ToolFailed | None:
        """Count a tool call about to start, or refuse it when the tool-call budget has no
        room: in ``finish`` mode its run gets the refusal as the call's outcome (the loop
        tells the model and asks for the final answer), in ``cancel`` mode every run of the
        batch is cancelled.

        Returns:
            ``None`` (the call was counted: start it), or the ``ToolFailed`` to hand the
            loop instead of running the call.

        Raises:
            trio.Cancelled: ``cancel`` mode, without room: the batch's runs were cancelled.
        """
        over = self.ledger.check_tool_call()
        if over is None:
            self.ledger.start_tool_call()
            return None
        if self._cancel:
            self._cancel_runs(over)
        await trio.lowlevel.checkpoint()  # cancel mode: the caller's run is cancelled, this raises
        return ToolFailed(call.call_id, ToolError("budget_exhausted", over.describe()), over)

    def _cancel_runs(self, over: BudgetExceeded) -> None:
        for run in list(self._group.runs):
            if run.budget is None:
                run.budget = over
            run.cancel()
