"""Every bad configuration value of the policies is an ``agentcore.ConfigError``.

One test per public configuration value: ``except agentcore.ConfigError`` catches each bad
value, and the message names what was wrong. ``ConfigError`` stays a ``ValueError`` too, so
code written against the older ``ValueError`` keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import agentcore
from agentcore import ErrorKind, FallbackPolicy, RetryPolicy, Timeouts
from agentcore._core.ratebudget import RateBudget
from agentcore._core.slots import AdaptiveLimit
from agentcore.core import SlotQueue

NOT_NUMBERS = ["1", None, True, [1]]


def caught(make: Callable[[], Any]) -> str:
    """The message of the ConfigError that ``make`` raises, caught as users catch it."""
    try:
        make()
    except agentcore.ConfigError as exc:
        assert isinstance(exc, ValueError)  # kept catchable as before
        return str(exc)
    raise AssertionError("no ConfigError")


@pytest.mark.parametrize("bad", [0, -3, 2.0, *NOT_NUMBERS])
def test_retry_policy_max_attempts(bad: Any) -> None:
    assert "max_attempts" in caught(lambda: RetryPolicy(max_attempts=bad))


@pytest.mark.parametrize("field", ["base_delay", "max_delay", "max_retry_after", "max_elapsed"])
@pytest.mark.parametrize("bad", [-0.5, math.nan, *NOT_NUMBERS])
def test_retry_policy_seconds(field: str, bad: Any) -> None:
    assert field in caught(lambda: RetryPolicy(**{field: bad}))


@pytest.mark.parametrize("bad", [1, 0, "no", None])
def test_retry_policy_stop_on_repeat(bad: Any) -> None:
    assert "stop_on_repeat" in caught(lambda: RetryPolicy(stop_on_repeat=bad))


@pytest.mark.parametrize("bad", ["server", ErrorKind.SERVER, ["server"], [ErrorKind.DEADLINE]])
def test_fallback_policy_on(bad: Any) -> None:
    assert "FallbackPolicy.on" in caught(lambda: FallbackPolicy(bad))


@pytest.mark.parametrize("bad", [0, -1, 1.5, *NOT_NUMBERS])
def test_slot_queue_limit(bad: Any) -> None:
    assert "slot limit" in caught(lambda: SlotQueue(bad))
    queue: SlotQueue[object] = SlotQueue(2)
    assert "slot limit" in caught(lambda: queue.set_limit(bad))
    assert queue.limit == 2


@pytest.mark.parametrize("bad", ["lifo", "", None, 1])
def test_slot_queue_policy(bad: Any) -> None:
    assert "slot policy" in caught(lambda: SlotQueue(4, bad))


@pytest.mark.parametrize(
    ("ceiling", "floor", "factor"),
    [(0, 1, 0.5), (4, 0, 0.5), (4, 5, 0.5), ("4", 1, 0.5), (4, 1, 0.0), (4, 1, 1.0),
     (4, 1, math.nan), (4, 1, "half")],
)  # fmt: skip
def test_adaptive_limit_bounds_and_factor(ceiling: Any, floor: Any, factor: Any) -> None:
    message = caught(lambda: AdaptiveLimit(ceiling, floor, factor))
    assert "floor <= ceiling" in message or "decrease_factor" in message


@pytest.mark.parametrize("field", ["requests_per_minute", "tokens_per_minute"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, "60", True])
def test_rate_budget_limits(field: str, bad: Any) -> None:
    assert field in caught(lambda: RateBudget(**{field: bad}))


@pytest.mark.parametrize("field", ["connect", "read", "total"])
@pytest.mark.parametrize("bad", [0, -1.0, math.nan, "10", True])
def test_timeouts(field: str, bad: Any) -> None:
    assert f"Timeouts.{field}" in caught(lambda: Timeouts(**{field: bad}))


def test_good_values_are_accepted() -> None:
    assert RetryPolicy(max_attempts=1, base_delay=0, stop_on_repeat=False).max_attempts == 1
    assert Timeouts(connect=None, read=0.5, total=math.inf).read == 0.5
    assert SlotQueue(1, "priority").limit == 1
    assert RateBudget(1, None).limits == (1, None)
    assert AdaptiveLimit(4, 4, 0.9).limit == 4


@agentcore.tool
def _lookup(key: str) -> str:
    """Look a key up."""
    return key


@pytest.mark.parametrize("bad", [_lookup, "lookup", 3, [_lookup, "lookup"]])
def test_task_tools(bad: Any) -> None:
    assert "Task.tools" in caught(lambda: agentcore.Task(prompt="{input}", tools=bad))


@pytest.mark.parametrize("bad", ["server", 3, ["server"]])
def test_driver_options_mcp(bad: Any) -> None:
    server = agentcore.McpServer.stdio("mcp-fs", ["/data"])
    assert "mcp" in caught(lambda: agentcore.DriverOptions(mcp=bad))
    assert "mcp" in caught(lambda: agentcore.DriverOptions(mcp=server))


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("max_tokens", 0), ("max_tokens", 2.0), ("max_tokens", "64"), ("max_tokens", True),
        ("temperature", "x"), ("temperature", -0.1), ("temperature", math.nan),
        ("top_p", "0.9"), ("top_p", -1),
        ("tool_choice", ""), ("tool_choice", 1),
        ("stop", "END"), ("stop", [1]),
        ("seed", 1.5), ("seed", "7"),
    ],
)  # fmt: skip
def test_model_params(field: str, bad: Any) -> None:
    assert f"ModelParams.{field}" in caught(lambda: agentcore.ModelParams(**{field: bad}))


def test_good_model_params_are_accepted() -> None:
    params = agentcore.ModelParams(
        max_tokens=1, temperature=0, top_p=1.0, tool_choice="none", stop=["END"], seed=-3
    )
    assert (params.max_tokens, params.stop, params.seed) == (1, ("END",), -3)


@pytest.mark.parametrize(
    ("option", "bad"),
    [("retry", 3), ("timeouts", 10), ("seed", "7"), ("adaptive", "yes"), ("stream", "no"),
     ("transport", "h3")],
)  # fmt: skip
async def test_open_driver_refuses_a_wrong_type_before_opening(option: str, bad: Any) -> None:
    # (docs/decisions.md once recorded these as accepted without a word.)
    with pytest.raises(agentcore.ConfigError, match=option):
        async with agentcore.open_driver("sim://", **{option: bad}):
            raise AssertionError("opened")
