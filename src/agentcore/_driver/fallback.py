"""Model fallback in the driver: one request path per backend, tried in order.

Theory of operation
-------------------
With fallbacks configured, the driver's request path is a :class:`FallbackRequests`: one
:class:`~agentcore._driver.requests.ModelRequests` per backend (its own model client, its own slot
limiter, the shared retry policy), in order of preference. A request goes to the first; when
it fails for good there, the pure :class:`~agentcore._core.fallback.FallbackPolicy` says
whether it goes on to the next. Slots are per backend: a request waiting for, or holding, a
slot of one backend never holds one of another.

Every backend but the last has a circuit breaker (:class:`~agentcore._driver.breaker.BackendBreaker`
over the pure :class:`~agentcore._core.fallback.Breaker`, configured by a
:class:`~agentcore._core.fallback.CircuitBreaker`; ``None`` turns it off): while it is open a
request passes that backend over and starts on the next one at once, and when its cool-down
is over one request is sent as the probe (a probe cancelled before its first attempt's outcome
hands the probe on).

The request statistics of every backend go to one list (``RequestStats.backend`` names the
backend), and a run records which backend gave the final event of each of its requests
(``Result.served_by``). A request that fell over is still one request of its run: its
``turns`` and time-to-first-token entries count it once.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.events import CallModel, ModelFailed, ModelResponded
from .._core.fallback import CircuitBreaker, FallbackPolicy
from .._observe.steps import StepSink
from .breaker import BackendBreaker, PassedOver
from .requests import ModelRequests, StreamSink
from .runs import Run

__all__ = ["FallbackRequests"]


class FallbackRequests:
    """Sends model requests through an ordered list of backends (see the module docstring)."""

    def __init__(
        self,
        routes: Sequence[tuple[str, ModelRequests]],
        policy: FallbackPolicy,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self._names = [name for name, _ in routes]
        self._routes = [requests for _, requests in routes]
        self._policy = policy
        for requests in self._routes[:-1]:
            requests.breaker = None if breaker is None else BackendBreaker(breaker, policy.on)
        self.stats = self._routes[0].stats
        """Shared by every backend: a request that fell over counts once per backend it
        visited (``RequestStats.backend`` says which)."""
        for requests in self._routes[1:]:
            requests.stats = self.stats

    @property
    def names(self) -> tuple[str, ...]:
        """The backends' names, primary first."""
        return tuple(self._names)

    @property
    def sink(self) -> StepSink | None:
        """Where every backend's request path reports requests made outside any run."""
        return self._routes[0].sink

    @sink.setter
    def sink(self, sink: StepSink | None) -> None:
        for requests in self._routes:
            requests.sink = sink

    async def send(
        self, call: CallModel, run: Run | None, sink: StreamSink | None = None
    ) -> ModelResponded | ModelFailed:
        """Make ``call`` on the first backend, going on down the list as the policy says.

        A streamed request whose deltas already reached the caller (``sink.delivered``) is
        not sent again anywhere: its failure is final.
        """
        routes = self._routes
        index = 0
        while True:
            route = routes[index]
            breaker = route.breaker
            if breaker is None:
                event = await route.send(call, run, sink)
            else:
                admission = breaker.admit()
                if not admission.send:
                    index += 1  # passed over while open: never the last, which has none
                    continue
                probe = admission.probe
                try:
                    event = await route.send(call, run, sink, probe=probe)
                except PassedOver:
                    index += 1  # it opened while the request waited for its first slot
                    continue
                except BaseException:
                    if probe:
                        breaker.abandon(probe)
                    raise
            if isinstance(event, ModelFailed) and not (sink is not None and sink.delivered):
                following = self._policy.next(index, len(routes), event.error)
                if following is not None:
                    if run is not None:  # still the same request of the run
                        run.turns -= 1
                        run.ttft = run.ttft[:-1]
                    index = following
                    continue
            if run is not None:
                if run.served_by is None:
                    run.served_by = []
                run.served_by.append(self._names[index])
            return event
