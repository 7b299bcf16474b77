"""Usage budgets: limits on model requests, tokens and tool calls, per run or per batch.

Theory of operation
-------------------
A :class:`UsageLimits` value names at most one limit per :class:`Budget`; ``None`` means no
limit. What has been used so far is a :class:`UsageTally`. Whether a budget has run out is a
pure function of the two (:func:`exhausted`):

- ``REQUESTS`` and ``TOOL_CALLS`` are exact: a request or a tool call is made only while
  ``used < limit``, so the count never passes the limit (:func:`tool_calls_exceed` checks a
  whole tool turn before any of its calls starts);
- the token budgets (``INPUT_TOKENS``, ``OUTPUT_TOKENS``, ``TOTAL_TOKENS``) are checked before
  each request. For a run, the next request is made only while ``used < limit``: the tokens of
  a request are known only once it has been answered, so a run's total can pass a token limit
  by the use of the one request that crossed it, never by more. A batch's requests run side
  by side, so its ledger *reserves* each request's tokens before it is sent (an estimate of
  its prompt, and its ``max_tokens`` or an estimate of its reply) and sends it only if the
  tokens used plus those reserved by requests in flight plus this reservation fit the limit;
  the reply then replaces the reservation with what was really used. A batch's total can pass
  a token limit only by what the requests in flight use beyond their reservations.

The agent loop checks a run's limits (``LoopConfig.limits``) before each model request and
before each tool turn, and ends the run with ``Abort(BUDGET_EXHAUSTED)`` whose reason names
the budget (:class:`BudgetExceeded`). A batch's limits are kept by a :class:`BatchLedger`,
which the driver charges with every answered request and every tool call of the batch's runs;
once it is exhausted the driver starts no new run, and either lets the running ones finish or
cancels them.
"""

from __future__ import annotations

import enum
from typing import Literal

import attrs

from .messages import Usage
from .validators import optional_int_at_least

__all__ = [
    "BatchLedger",
    "Budget",
    "BudgetExceeded",
    "UsageLimits",
    "UsageTally",
    "exhausted",
    "tool_calls_exceed",
]


class Budget(enum.Enum):
    """One kind of usage a limit can bound."""

    REQUESTS = "requests"  #: model requests made (retries of one request count once)
    INPUT_TOKENS = "input_tokens"  #: prompt tokens, summed over the replies
    OUTPUT_TOKENS = "output_tokens"  #: completion tokens, summed over the replies
    TOTAL_TOKENS = "total_tokens"  #: prompt plus completion tokens
    TOOL_CALLS = "tool_calls"  #: tool calls started (invalid calls the loop rejects do not count)

    __hash__ = object.__hash__


@attrs.frozen(kw_only=True)
class UsageLimits:
    """Limits on what a run (``Task.limits``, ``LoopConfig.limits``) or a batch
    (``open_batch(budget=...)``) may use. ``None``: no limit on that budget.

    Raises:
        ConfigError: a limit that is not a non-negative integer.
    """

    requests: int | None = attrs.field(default=None, validator=optional_int_at_least(0))
    """Model requests."""
    input_tokens: int | None = attrs.field(default=None, validator=optional_int_at_least(0))
    """Prompt tokens (checked before each request; see the module docstring)."""
    output_tokens: int | None = attrs.field(default=None, validator=optional_int_at_least(0))
    """Completion tokens (checked before each request)."""
    total_tokens: int | None = attrs.field(default=None, validator=optional_int_at_least(0))
    """Prompt plus completion tokens (checked before each request)."""
    tool_calls: int | None = attrs.field(default=None, validator=optional_int_at_least(0))
    """Tool calls started."""


@attrs.frozen
class UsageTally:
    """What has been used so far (the measure a :class:`UsageLimits` is checked against)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0


@attrs.frozen
class BudgetExceeded:
    """Which budget ran out, where, and by how much: the detail of an
    ``AbortKind.BUDGET_EXHAUSTED`` abort (``AbortReason.budget``)."""

    budget: Budget
    scope: Literal["run", "batch"]
    limit: int
    used: int
    """The use counted when the budget was checked (for a tool turn: with its calls)."""

    def describe(self) -> str:
        """A one-line explanation, for messages and logs."""
        return (
            f"the {self.scope} budget for {self.budget.value} ran out "
            f"({self.used} used, limit {self.limit})"
        )


def exhausted(
    limits: UsageLimits, tally: UsageTally, scope: Literal["run", "batch"]
) -> BudgetExceeded | None:
    """The first budget (in :class:`Budget` order) with no room for another request, if any.

    Tool calls are not checked here: a turn's calls are checked together
    (:func:`tool_calls_exceed`).
    """
    checks = (
        (Budget.REQUESTS, limits.requests, tally.requests),
        (Budget.INPUT_TOKENS, limits.input_tokens, tally.input_tokens),
        (Budget.OUTPUT_TOKENS, limits.output_tokens, tally.output_tokens),
        (Budget.TOTAL_TOKENS, limits.total_tokens, tally.input_tokens + tally.output_tokens),
    )
    for budget, limit, used in checks:
        if limit is not None and used >= limit:
            return BudgetExceeded(budget, scope, limit, used)
    return None


def tool_calls_exceed(
    limits: UsageLimits, used: int, more: int, scope: Literal["run", "batch"]
) -> BudgetExceeded | None:
    """Whether starting ``more`` tool calls after ``used`` would pass the tool-call limit."""
    limit = limits.tool_calls
    if limit is not None and more and used + more > limit:
        return BudgetExceeded(Budget.TOOL_CALLS, scope, limit, used + more)
    return None


class BatchLedger:
    """The usage of one batch, counted by the driver, checked against the batch's limits.

    Pure bookkeeping (no clock, no I/O). The driver reserves every request's tokens before
    it is sent (:meth:`reserve`, which also counts the request) and settles the reservation
    with the tokens the reply reports (:meth:`settle`), and counts every tool call when it
    starts (:meth:`start_tool_call`). The ``check_*`` methods say whether a budget has no
    room left for what the caller is about to start; the first budget found without room is
    kept in :attr:`exceeded`.
    """

    __slots__ = (
        "_held_input",
        "_held_output",
        "_input",
        "_limits",
        "_output",
        "_requests",
        "_tool_calls",
        "exceeded",
    )

    def __init__(self, limits: UsageLimits) -> None:
        self._limits = limits
        self._requests = 0
        self._input = 0
        self._output = 0
        self._tool_calls = 0
        self._held_input = 0
        self._held_output = 0
        self.exceeded: BudgetExceeded | None = None
        """The first budget found without room, once one has been."""

    @property
    def limits(self) -> UsageLimits:
        """The batch's limits."""
        return self._limits

    @property
    def held(self) -> tuple[int, int]:
        """Input and output tokens reserved by the requests in flight."""
        return self._held_input, self._held_output

    def tally(self) -> UsageTally:
        """What the batch has used so far (reservations not included)."""
        return UsageTally(self._requests, self._input, self._output, self._tool_calls)

    def _found(self, over: BudgetExceeded | None) -> BudgetExceeded | None:
        if over is not None and self.exceeded is None:
            self.exceeded = over
        return over

    def check_request(self) -> BudgetExceeded | None:
        """The budget (requests or tokens) without room for one more request, if any."""
        return self._found(exhausted(self._limits, self.tally(), "batch"))

    def check_tool_call(self) -> BudgetExceeded | None:
        """The tool-call budget, if it has no room for one more call."""
        limit = self._limits.tool_calls
        if limit is not None and self._tool_calls >= limit:
            return self._found(BudgetExceeded(Budget.TOOL_CALLS, "batch", limit, self._tool_calls))
        return None

    def check_run(self) -> BudgetExceeded | None:
        """The first budget without room for anything more, if any: no new run should start."""
        return self.check_request() or self.check_tool_call()

    def reserve(self, input_tokens: int, output_tokens: int) -> BudgetExceeded | None:
        """Reserve a request's tokens and count it, if it fits; else the budget it does not fit.

        It fits when no budget is spent (:meth:`check_request`) and, for each token budget,
        the tokens used plus those reserved by requests in flight plus this reservation do
        not pass the limit. A refused request is not counted and reserves nothing.
        """
        over = self.check_request()
        if over is not None:
            return over
        limits = self._limits
        want_in = self._input + self._held_input + input_tokens
        want_out = self._output + self._held_output + output_tokens
        for budget, limit, want in (
            (Budget.INPUT_TOKENS, limits.input_tokens, want_in),
            (Budget.OUTPUT_TOKENS, limits.output_tokens, want_out),
            (Budget.TOTAL_TOKENS, limits.total_tokens, want_in + want_out),
        ):
            if limit is not None and want > limit:
                return self._found(BudgetExceeded(budget, "batch", limit, want))
        self._held_input += input_tokens
        self._held_output += output_tokens
        self._requests += 1
        return None

    def settle(self, input_tokens: int, output_tokens: int, usage: Usage | None) -> None:
        """Release a reservation made by :meth:`reserve`, counting the tokens the request
        really used (``usage``; ``None`` when it got no reply)."""
        self._held_input -= input_tokens
        self._held_output -= output_tokens
        if usage is not None:
            self._input += usage.prompt_tokens
            self._output += usage.completion_tokens

    def start_tool_call(self) -> None:
        """Count one tool call."""
        self._tool_calls += 1
