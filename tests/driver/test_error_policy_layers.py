"""The layers above the core decide by the error table's row: the slot limiter's adaptive
shrink, the rate budget's hold-back, the warm-up's verdict and the distributed workers' fleet
pause (a pure decision: no server is needed to check it). Each is checked for every kind
against the table, and against a flipped row in a test-local copy of it."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from agentcore import BackendUnavailable, ErrorKind, ModelError, RetryPolicy, Task, open_driver
from agentcore._core import error_policy
from agentcore._core.error_policy import policy_of
from agentcore._distributed.backoff import SharedBackoff
from agentcore._driver.limit_scope import LimitScope
from agentcore._driver.rate_limiter import RateLimiter
from agentcore._driver.slot_limiter import SlotLimiter
from agentcore._tasks.warmup import warm_up
from agentcore.core import CallModel, ModelFailed
from agentcore.testing import ScriptedModel

ALL_KINDS = list(ErrorKind)


def flip(monkeypatch: pytest.MonkeyPatch, kind: ErrorKind, column: str) -> None:
    row = policy_of(kind)
    flipped = attrs.evolve(row, **{column: not getattr(row, column)})
    monkeypatch.setitem(error_policy._ROWS, kind, flipped)


async def _limit_after_failure(kind: ErrorKind) -> tuple[int, int]:
    limiter = SlotLimiter(8, adaptive=True)
    slot = await limiter.acquire()
    limiter.release(slot, failed=kind)
    stats = limiter.statistics()
    return limiter.limit, stats.overloads


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_the_adaptive_limit_shrinks_on_the_kinds_whose_row_slows_down(
    kind: ErrorKind,
) -> None:
    limit, overloads = await _limit_after_failure(kind)
    slows = policy_of(kind).slows_down
    assert (limit < 8, overloads) == (slows, int(slows))


async def test_the_adaptive_limit_follows_a_flipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    flip(monkeypatch, ErrorKind.SERVER, "slows_down")
    flip(monkeypatch, ErrorKind.OVERLOADED, "slows_down")
    assert (await _limit_after_failure(ErrorKind.SERVER))[0] < 8
    assert (await _limit_after_failure(ErrorKind.OVERLOADED))[0] == 8


async def _held_back(kind: ErrorKind) -> bool:
    rates = RateLimiter(requests_per_minute=10_000)
    error = ModelError(kind, "x", status=429, retryable=True, retry_after=30.0)
    now = trio.current_time()
    rates.replied(CallModel("r", ()), None, ModelFailed("r", error), None)
    return rates.budget.blocked_until > now and rates.statistics().rate_limited == 1


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_the_rate_budget_holds_back_on_the_kinds_whose_row_says_so(kind: ErrorKind) -> None:
    assert await _held_back(kind) is policy_of(kind).holds_back_budget


async def test_the_rate_budget_follows_a_flipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    flip(monkeypatch, ErrorKind.OVERLOADED, "holds_back_budget")
    flip(monkeypatch, ErrorKind.RATE_LIMITED, "holds_back_budget")
    assert await _held_back(ErrorKind.OVERLOADED)
    assert not await _held_back(ErrorKind.RATE_LIMITED)


async def _warm_up_stops(kind: ErrorKind) -> bool:
    model = ScriptedModel([ModelError(kind, "no", status=500)])
    async with open_driver(model, retry=RetryPolicy(max_attempts=1)) as driver:
        try:
            await warm_up(driver, Task(prompt="{input}"), batch_id="b", strategy="request")
        except BackendUnavailable as exc:
            assert exc.error.kind is kind
            return True
    return False


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_warm_up_stops_the_batch_on_the_kinds_whose_row_says_fatal(
    kind: ErrorKind, autojump_clock: Any
) -> None:
    assert await _warm_up_stops(kind) is policy_of(kind).fatal_at_warm_up


async def test_warm_up_follows_a_flipped_row(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: Any
) -> None:
    flip(monkeypatch, ErrorKind.SERVER, "fatal_at_warm_up")
    flip(monkeypatch, ErrorKind.AUTH, "fatal_at_warm_up")
    assert await _warm_up_stops(ErrorKind.SERVER)
    assert not await _warm_up_stops(ErrorKind.AUTH)


class _PauseRecorder:
    """A stand-in for a distributed batch's connection: no pause is published yet, and each
    PAUSE script call is recorded."""

    def __init__(self) -> None:
        self.pauses: list[list[str]] = []

    async def command(self, *args: Any) -> Any:
        return -2  # PTTL of a missing key

    async def script(self, name: str, keys: list[str], args: list[str]) -> Any:
        self.pauses.append([name, *keys, *args])
        return 1


async def _published_pause(kind: ErrorKind, *, shared: bool = True) -> bool:
    conn = _PauseRecorder()
    error = ModelError(kind, "x", retryable=True, retry_after=2.0)
    backoff = SharedBackoff(
        ScriptedModel([error]),
        conn,  # type: ignore[arg-type]
        "pause",
        scope=LimitScope(shared),
    )
    await backoff.exchange(CallModel("r", ()))
    assert conn.pauses in ([], [["PAUSE", "pause", "2000"]])
    return bool(conn.pauses)


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_a_distributed_worker_pauses_the_fleet_on_the_kinds_whose_row_says_so(
    kind: ErrorKind,
) -> None:
    # The shared back-off's decision is pure: no server is needed to check it. The limits
    # are known to be shared here (configured, say).
    assert await _published_pause(kind) is policy_of(kind).pauses_fleet


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_no_kind_pauses_the_fleet_where_the_limits_are_not_known_shared(
    kind: ErrorKind,
) -> None:
    # The driver's rule at fleet scale: a refusal from a backend whose limits nothing shows
    # to be shared is the request's own.
    assert not await _published_pause(kind, shared=False)


async def test_the_fleet_pause_follows_a_flipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    flip(monkeypatch, ErrorKind.SERVER, "pauses_fleet")
    flip(monkeypatch, ErrorKind.RATE_LIMITED, "pauses_fleet")
    assert await _published_pause(ErrorKind.SERVER)
    assert not await _published_pause(ErrorKind.RATE_LIMITED)
