"""A distributed batch pauses every worker after a 429 only where the limits are known to be
shared, by the driver's own rule (agentcore._driver.limit_scope): limits configured, published
by a successful reply (here, or on any worker through the fleet's budget), or documented by
the provider. A refusal's own headers are no evidence, and are not reported to the fleet's
budget as limits. The shared back-off's decisions are pure: a recording stand-in for the
server checks them (the tier in tests/distributed runs them on a real one)."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from agentcore import ErrorKind, ModelError, QueueAddress, Usage
from agentcore._core.ratebudget import RateObservation
from agentcore._distributed.backoff import SharedBackoff
from agentcore._distributed.budget import FleetBudget
from agentcore._driver.limit_scope import LimitScope
from agentcore.core import AssistantMessage, CallModel, ModelFailed, ModelResponded
from agentcore.wire import Exchange

LIMITS = RateObservation(limit_requests=500, remaining_requests=0)
"""What a balancer's refusal may claim, and a provider's successful reply publish."""


def _ok(rate: RateObservation | None = None) -> Exchange:
    return Exchange(ModelResponded("r", AssistantMessage("done"), Usage(10, 1), "stop"), rate=rate)


def _refused(rate: RateObservation | None = None) -> Exchange:
    error = ModelError(ErrorKind.RATE_LIMITED, "slow down", 429, True, retry_after=2.0)
    return Exchange(ModelFailed("r", error), rate=rate)


class _Replies:
    """A model client that answers with the given exchanges in turn, from ``base_url``."""

    def __init__(self, replies: Sequence[Exchange], base_url: str | None = None) -> None:
        self._replies = list(replies)
        if base_url is not None:
            self.codec = SimpleNamespace(base_url=base_url)

    async def exchange(self, call: CallModel) -> Exchange:
        return self._replies.pop(0)

    async def aclose(self) -> None:
        pass


class _Server:
    """The batch's server, as far as the shared back-off and the fleet's budget use it: no
    pause is set, a PAUSE is recorded, and RESERVE grants every cost at once and says which
    limits the fleet knows (``fleet_limits``), recording what each call reported."""

    def __init__(self, fleet_limits: tuple[int | None, int | None] = (None, None)) -> None:
        self.fleet_limits = fleet_limits
        self.pauses: list[list[str]] = []
        self.reserves: list[list[str]] = []

    async def command(self, *args: Any) -> Any:
        return -2  # PTTL of a missing key

    async def script(self, name: str, keys: list[str], args: list[str]) -> Any:
        if name == "PAUSE":
            self.pauses.append(args)
            return 1
        assert name == "RESERVE"
        self.reserves.append(args)
        rpm, tpm = (-1 if v is None else v for v in self.fleet_limits)
        costs = args[12:]
        return [0, rpm, tpm, 1, 0, *(0 for _ in costs)]

    def learned(self) -> list[tuple[str, str]]:
        """The limits each RESERVE call reported as learned from headers."""
        return [(args[6], args[7]) for args in self.reserves]


def _backoff(
    model: _Replies, server: _Server, *, configured: bool = False, budget: bool = False
) -> SharedBackoff:
    fleet = None
    if budget:
        keys = QueueAddress.parse("redis://127.0.0.1:1/b").keys
        fleet = FleetBudget(server, keys, "w1", check_every=0.0)  # type: ignore[arg-type]
    return SharedBackoff(
        model,  # type: ignore[arg-type]
        server,  # type: ignore[arg-type]
        "pause",
        budget=fleet,
        scope=LimitScope.of(model, configured=configured),
    )


async def _pauses(backoff: SharedBackoff, server: _Server, attempts: int) -> int:
    for _ in range(attempts):
        await backoff.exchange(CallModel("r", ()))
    return len(server.pauses)


async def test_a_429_from_a_backend_with_no_evidence_pauses_nobody_else() -> None:
    # A balancer whose successful replies publish nothing refuses one request, claiming an
    # exhausted limit in the refusal's own headers: that request's own refusal.
    server = _Server()
    backoff = _backoff(_Replies([_ok(), _refused(LIMITS), _ok()]), server)
    assert await _pauses(backoff, server, 3) == 0


async def test_a_429_after_a_successful_reply_published_the_limits_pauses_the_fleet() -> None:
    server = _Server()
    backoff = _backoff(_Replies([_ok(LIMITS), _refused()]), server)
    assert await _pauses(backoff, server, 2) == 1
    assert server.pauses == [["2000"]]


async def test_configured_limits_make_the_first_429_pause_the_fleet() -> None:
    server = _Server()
    backoff = _backoff(_Replies([_refused()]), server, configured=True)
    assert await _pauses(backoff, server, 1) == 1


@pytest.mark.parametrize(
    ("base_url", "pauses"),
    [
        ("https://api.openai.com/v1", 1),
        ("https://api.anthropic.com", 1),
        ("https://gateway.example/v1", 0),
        ("http://127.0.0.1:8000/v1", 0),
    ],
)
async def test_a_provider_that_documents_shared_limits_pauses_the_fleet_from_its_first_429(
    base_url: str, pauses: int
) -> None:
    server = _Server()
    backoff = _backoff(_Replies([_refused()], base_url), server)
    assert await _pauses(backoff, server, 1) == pauses


async def test_limits_another_worker_learned_make_this_workers_429_pause_the_fleet() -> None:
    # This worker has seen no evidence; the fleet's budget knows the limits (another worker
    # learned them from a successful reply), so its first 429 is everyone's.
    server = _Server(fleet_limits=(500, None))
    backoff = _backoff(_Replies([_refused()]), server, budget=True)
    assert await _pauses(backoff, server, 1) == 1
    alone = _Server()
    backoff = _backoff(_Replies([_refused()]), alone, budget=True)
    assert await _pauses(backoff, alone, 1) == 0


async def test_a_refusals_own_headers_are_not_reported_to_the_fleet_as_limits() -> None:
    server = _Server()
    replies = _Replies([_refused(LIMITS), _ok(), _ok(LIMITS), _ok()])
    backoff = _backoff(replies, server, budget=True)
    await _pauses(backoff, server, 4)
    # Each call reports what came in since the one before: nothing after the refusal, the
    # published limits after the successful reply that carried them.
    assert server.learned() == [("", ""), ("", ""), ("", ""), ("500", "")]
