"""Retry storms and finish reasons through the driver, over HTTP on loopback.

llama-server answers ``500 Failed to parse tool call arguments as JSON`` to every copy of a
request whose history it cannot render; the driver used to send it six times. The same server
error twice in a row is now final; a 500 that changes, or a single one, is still retried.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentcore import ErrorKind, ModelError, RetryPolicy, open_driver
from agentcore._core.rejection import repeated_rejection
from tests.driver.helpers import make_loop
from tests.driver.openai_server import Reply, completion, error, open_openai_server

FAST_RETRY = RetryPolicy(max_attempts=6, base_delay=0.01, max_delay=0.02)
PARSE_FAILURE = "Failed to parse tool call arguments as JSON: parse error at line 1, column 2"


async def test_the_same_server_error_twice_is_final() -> None:
    async with (
        open_openai_server(lambda body, n: error(500, PARSE_FAILURE)) as server,
        open_driver(server.url, model="m", retry=FAST_RETRY) as driver,
    ):
        result = await driver.run(make_loop(0))
        stats = driver.statistics()
    assert result.status == "failed"
    assert result.error is not None and result.error.error is not None
    assert result.error.error.kind is ErrorKind.SERVER
    assert result.timings.attempts == 2
    assert stats.attempts == 2


async def test_a_flaky_server_gets_every_attempt_when_the_repeat_rule_is_off() -> None:
    # The server answers the same 500 every time; the user asked for 30 attempts and turned
    # the repeated-rejection rule off, so all 30 are made (zero back-off keeps it quick).
    patient = RetryPolicy(max_attempts=30, base_delay=0.0, stop_on_repeat=False)
    async with (
        open_openai_server(lambda body, n: error(500, "boom")) as server,
        open_driver(server.url, model="m", retry=patient) as driver,
    ):
        result = await driver.run(make_loop(0))
        stats = driver.statistics()
    assert result.status == "failed"
    assert result.error is not None and result.error.error is not None
    assert result.error.error.kind is ErrorKind.SERVER
    assert (result.timings.attempts, stats.attempts) == (30, 30)


async def test_a_flaky_server_ends_the_run_early_when_the_repeat_rule_is_on() -> None:
    # The default policy keeps the rule: the second identical 500 ends the request.
    assert RetryPolicy().stop_on_repeat
    eager = RetryPolicy(max_attempts=30, base_delay=0.0)
    async with (
        open_openai_server(lambda body, n: error(500, "boom")) as server,
        open_driver(server.url, model="m", retry=eager) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert (result.status, result.timings.attempts) == ("failed", 2)


async def test_a_server_error_that_changes_is_retried_as_before() -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        return error(500, f"worker {n} crashed") if n < 3 else completion("done")

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", retry=FAST_RETRY) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "ok"
    assert result.timings.attempts == 4


async def test_a_single_server_error_is_retried() -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        return error(500, PARSE_FAILURE) if n == 0 else completion("done")

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", retry=FAST_RETRY) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert (result.status, result.timings.attempts) == ("ok", 2)


@pytest.mark.parametrize(
    ("kind", "status"),
    [(ErrorKind.RATE_LIMITED, 429), (ErrorKind.OVERLOADED, 503), (ErrorKind.CONNECTION, None),
     (ErrorKind.TIMEOUT, None)],
)  # fmt: skip
def test_transient_kinds_repeat_without_becoming_final(kind: ErrorKind, status: int | None) -> None:
    error_value = ModelError(kind, "same", status=status, retryable=True)
    assert not repeated_rejection(error_value, error_value)


def test_only_an_identical_server_error_counts() -> None:
    first = ModelError(ErrorKind.SERVER, "boom", status=500, retryable=True)
    assert repeated_rejection(first, first)
    assert not repeated_rejection(None, first)
    assert not repeated_rejection(first, ModelError(ErrorKind.SERVER, "boom", status=502))
    assert not repeated_rejection(first, ModelError(ErrorKind.SERVER, "other", status=500))


async def test_driver_statistics_count_replies_cut_by_the_token_limit() -> None:
    def respond(body: dict[str, Any], n: int) -> Reply:
        reply = completion("cut" if n == 0 else "whole")
        return Reply(body=reply.body.replace(b'"stop"', b'"length"')) if n == 0 else reply

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m") as driver,
    ):
        result = await driver.run(make_loop(0))
        stats = driver.statistics()
    assert result.status == "ok"  # repaired on the second request
    assert stats.truncated_replies == 1
    assert [r.finish_reason for r in stats.recent_requests] == ["length", "stop"]
