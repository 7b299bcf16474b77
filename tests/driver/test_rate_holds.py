"""A 429's hold: no request is written while it is in force, whichever way it queued.

A 429 from an API with known limits holds every sender back for its ``retry-after``. Requests
that had already reserved budget, or had been granted a slot, before the hold began must not
slip through when their slot comes: the hold is checked where a request is about to be sent,
after every wait, for runs that wait in a task, runs parked in the slot line without one,
runs started inline (before any limit was known) and requests made outside any run.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import attrs
import pytest
import trio

from agentcore import ErrorKind, ModelError, open_driver, wire
from agentcore._distributed.backoff import SharedBackoff
from agentcore._driver.limit_scope import documents_shared_limits
from agentcore.core import CallModel
from agentcore.testing import ScriptedModel
from tests.driver.helpers import make_loop
from tests.driver.openai_server import Reply, completion, error, open_openai_server

HOLD = 5.0
AGENTS = 40
SLOTS = 4
REFUSED = 10
"""The request (in arrival order) that the server refuses with a 429."""

_LIMITS = (
    ("x-ratelimit-limit-requests", "10000"),
    ("x-ratelimit-remaining-requests", "9000"),
    ("x-ratelimit-limit-tokens", "10000000"),
    ("x-ratelimit-remaining-tokens", "9000000"),
    ("x-ratelimit-reset-requests", "6ms"),
    ("x-ratelimit-reset-tokens", "6ms"),
)


def assert_nothing_sent_during_the_hold(arrivals: list[float], refused_at: float) -> None:
    """``arrivals``: when each request reached the server, in order; the one at ``REFUSED``
    was answered with the 429 at ``refused_at``."""
    during = [
        (n, round(t - refused_at, 3))
        for n, t in enumerate(arrivals)
        if n != REFUSED and refused_at <= t < refused_at + HOLD
    ]
    assert during == [], "requests (index, seconds into the hold) sent while it was in force"
    # Nothing was lost: the refused request was sent again once the hold was over.
    assert arrivals[-1] >= refused_at + HOLD


async def test_no_request_reaches_a_rate_limited_api_while_its_429_holds(
    autojump_clock: Any,
) -> None:
    # A driver opened by hand on an API that publishes its limits: the first requests go
    # out before any limit is known (started inline, parked without a rate reservation),
    # the later ones reserve budget and then wait for one of the few slots.
    arrivals: list[float] = []
    refused: list[float] = []

    def respond(body: dict[str, Any], n: int) -> Reply:
        now = trio.current_time()
        arrivals.append(now)
        if n == REFUSED:
            refused.append(now + 0.3)
            headers = (*_LIMITS, ("retry-after", str(int(HOLD))))
            reply = error(429, "Rate limit reached", headers)
            return Reply(reply.status, reply.headers, reply.body, delay=0.3)
        reply = completion("done")
        return Reply(reply.status, (*reply.headers, *_LIMITS), reply.body, delay=1.0)

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", max_inflight=SLOTS) as driver,
        driver.stream(make_loop(i) for i in range(AGENTS)) as results,
    ):
        statuses = [r.status async for r in results]
    assert statuses == ["ok"] * AGENTS
    assert len(arrivals) == AGENTS + 1
    assert_nothing_sent_during_the_hold(arrivals, refused[0])


def _scripted() -> tuple[ScriptedModel, list[float], list[float]]:
    """A model behind a per-minute limit that refuses the ``REFUSED``-th request it gets with
    a quick 429 while the other slots are busy."""
    arrivals: list[float] = []
    refused: list[float] = []
    limited = ModelError(
        ErrorKind.RATE_LIMITED, "slow down", status=429, retryable=True, retry_after=HOLD
    )

    def policy(call: CallModel) -> Any:
        arrivals.append(trio.current_time())
        if len(arrivals) - 1 == REFUSED:
            refused.append(trio.current_time() + 0.3)
            return limited
        return "done"

    def latency(call: CallModel) -> float:
        return 0.3 if len(arrivals) - 1 == REFUSED else 1.0

    return ScriptedModel(policy, latency=latency), arrivals, refused


@pytest.mark.parametrize("path", ["parked", "tasks", "outside_runs"])
async def test_no_request_is_sent_while_a_429_holds_whichever_way_it_waited(
    autojump_clock: Any, path: str
) -> None:
    # parked: runs of a stream wait in the slot line as data, their budget reserved;
    # tasks: runs driven in their own tasks wait for budget, then for a slot;
    # outside_runs: bare model calls do the same without a run.
    model, arrivals, refused = _scripted()
    async with open_driver(model, max_inflight=SLOTS, requests_per_minute=10_000) as driver:
        if path == "parked":
            async with driver.stream(make_loop(i) for i in range(AGENTS)) as results:
                statuses = [r.status async for r in results]
        else:
            statuses = []

            async def one(i: int) -> None:
                if path == "tasks":
                    statuses.append((await driver.run(make_loop(i), index=i)).status)
                else:
                    event = await driver.call_model(CallModel(f"call-{i}", ()))
                    statuses.append("ok" if type(event).__name__ == "ModelResponded" else "no")

            async with trio.open_nursery() as nursery:
                for i in range(AGENTS):
                    nursery.start_soon(one, i)
    assert statuses == ["ok"] * AGENTS
    assert len(arrivals) == AGENTS + 1
    assert_nothing_sent_during_the_hold(arrivals, refused[0])


def test_the_providers_that_document_shared_limits_are_known_by_their_host() -> None:
    def client_for(url: str, **options: Any) -> Any:
        return SimpleNamespace(codec=wire.backend(url, model="m", api_key="k", **options).codec)

    assert documents_shared_limits(client_for("openai://"))
    assert documents_shared_limits(client_for("anthropic://"))
    # The same dialects elsewhere (a gateway, a self-hosted server) say nothing by themselves.
    assert not documents_shared_limits(client_for("https://gateway.example/v1"))
    assert not documents_shared_limits(client_for("vllm://127.0.0.1:8000"))
    assert not documents_shared_limits(ScriptedModel(["x"]))


class _NoPauseSet:
    """A distributed batch's server as the shared back-off reads it: no pause key is set, a
    published pause is accepted and ignored (so only the driver's own hold can hold)."""

    async def command(self, *args: Any) -> Any:
        return -2  # PTTL of a missing key

    async def script(self, name: str, keys: list[str], args: list[str]) -> Any:
        return 1


async def test_a_429_whose_limits_no_successful_reply_published_holds_only_its_request(
    autojump_clock: Any,
) -> None:
    # A balancer in front of several deployments: it refuses one request with a 429 that
    # claims an exhausted limit, while its successful replies publish none. The other senders
    # go on at full speed; the refused request waits its own retry-after, then passes.
    arrivals: list[float] = []
    refused: list[float] = []
    refused_body: list[Any] = []
    again: list[float] = []
    claims = (
        ("x-ratelimit-limit-requests", "100"),
        ("x-ratelimit-remaining-requests", "0"),
        ("retry-after", str(int(HOLD))),
    )

    def respond(body: dict[str, Any], n: int) -> Reply:
        now = trio.current_time()
        arrivals.append(now)
        if body["messages"] in refused_body:
            again.append(now)
        if n == REFUSED:
            refused.append(now + 0.3)
            refused_body.append(body["messages"])
            reply = error(429, "Rate limit reached", claims)
            return Reply(reply.status, reply.headers, reply.body, delay=0.3)
        return attrs.evolve(completion("done"), delay=1.0)

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", max_inflight=SLOTS) as driver,
    ):
        async with driver.stream(make_loop(i) for i in range(AGENTS)) as results:
            statuses = [r.status async for r in results]
        stats = driver.statistics()
    assert statuses == ["ok"] * AGENTS
    assert len(arrivals) == AGENTS + 1
    during = [t for t in arrivals if refused[0] <= t < refused[0] + HOLD]
    # Every slot but none stayed busy through the hold: a request a second on each.
    assert len(during) >= (SLOTS - 1) * int(HOLD) - 1
    assert len(again) == 1
    assert again[0] >= refused[0] + HOLD
    assert stats.rates is not None
    assert stats.rates.rate_limited == 1
    assert (stats.rates.requests_per_minute, stats.rates.waits) == (None, 0)


@pytest.mark.parametrize("client", ["bare", "worker"])
async def test_a_provider_that_documents_shared_limits_holds_from_its_first_429(
    autojump_clock: Any, client: str
) -> None:
    # OpenAI's own API, before any reply published its limits: its quota is documented as
    # shared, so its 429 holds everyone. A distributed worker wraps its client in the shared
    # back-off, which shows no codec but says what the client it wraps sends to: the
    # worker's own driver holds every sender too.
    model, arrivals, refused = _scripted()
    hosted: Any = SimpleNamespace(
        codec=SimpleNamespace(base_url="https://api.openai.com/v1"),
        exchange=model.exchange,
        aclose=model.aclose,
    )
    if client == "worker":
        hosted = SharedBackoff(hosted, _NoPauseSet(), "pause")  # type: ignore[arg-type]
        gateway = SimpleNamespace(codec=SimpleNamespace(base_url="https://gateway.example/v1"))
        elsewhere = SharedBackoff(gateway, _NoPauseSet(), "pause")  # type: ignore[arg-type]
        assert not documents_shared_limits(elsewhere)
    assert documents_shared_limits(hosted)
    async with (
        open_driver(hosted, max_inflight=SLOTS) as driver,
        driver.stream(make_loop(i) for i in range(AGENTS)) as results,
    ):
        statuses = [r.status async for r in results]
    assert statuses == ["ok"] * AGENTS
    assert_nothing_sent_during_the_hold(arrivals, refused[0])
