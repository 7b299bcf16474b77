"""Whose refusal a 429 is: the evidence that a backend's rate limits are shared by every
request sent to it, the one rule both the driver's rate limiter and a distributed batch's
shared back-off follow.

A 429 from an API whose limits are one quota for all of its caller's requests says that
nobody should send for a while: the driver holds every sender back, and a distributed batch
pauses every worker. Elsewhere (a proxy or balancer in front of several deployments, a gateway
with limits per replica, a self-hosted server shedding load) a refusal is the request's own:
the next request may well pass, so only the refused one waits its ``retry-after`` and an
adaptive slot limit shrinks. :class:`LimitScope` says which case a backend is, from three kinds
of evidence, any one of which is enough:

- the user configured limits (they are the user's limits for everything sent);
- a *successful* reply published limits in its headers (OpenAI and Anthropic send theirs on
  every answer; a gateway that refuses some requests while publishing nothing on the others
  does not);
- the API's provider documents one limit for all of an organisation's requests (OpenAI's and
  Anthropic's own APIs, known by their host: the same dialect behind a gateway is a different
  server).

A refusal's own headers are not evidence (a balancer may answer ``x-ratelimit-remaining-requests:
0`` for one deployment while the next has room), and until the limits are known to be shared
they are not read as the limits' state either.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import attrs

from .._core.events import ModelFailed, ModelResponded
from .._core.ratebudget import RateObservation

__all__ = ["SHARED_LIMIT_HOSTS", "LimitScope", "documents_shared_limits"]

SHARED_LIMIT_HOSTS = frozenset({"api.openai.com", "api.anthropic.com"})
"""Hosts of APIs whose providers document their rate limits as one quota for all of an
organisation's requests (OpenAI's and Anthropic's rate-limit guides)."""


def documents_shared_limits(client: object) -> bool:
    """Whether ``client`` talks to an API whose provider documents shared limits: its codec's
    ``base_url`` is on one of :data:`SHARED_LIMIT_HOSTS`, or, for a wrapper that shows no
    codec, its own ``shared_limits_documented`` says so for the client it wraps (``False`` for
    a client that says nothing of where it sends)."""
    said = getattr(client, "shared_limits_documented", None)
    if isinstance(said, bool):
        return said
    base_url = getattr(getattr(client, "codec", None), "base_url", None)
    return isinstance(base_url, str) and urlsplit(base_url).hostname in SHARED_LIMIT_HOSTS


@attrs.define
class LimitScope:
    """Whether a backend's rate limits are known to be shared by every request sent to it;
    see the module's docstring."""

    shared: bool = False
    """Known shared: a 429 holds every sender (the driver) or pauses every worker (a fleet)."""

    @classmethod
    def of(cls, client: object, *, configured: bool) -> LimitScope:
        """The scope before any reply: shared if limits were ``configured`` or ``client``'s
        provider documents them as shared."""
        return cls(configured or documents_shared_limits(client))

    def learn(
        self, event: ModelResponded | ModelFailed, observation: RateObservation | None
    ) -> bool:
        """Take one reply's evidence. Returns whether its rate headers may be read as the
        state of the limits: a successful reply's always, a refusal's only once the limits
        are known to be shared."""
        if isinstance(event, ModelResponded):
            if observation is not None and (
                observation.limit_requests is not None or observation.limit_tokens is not None
            ):
                self.shared = True  # a successful reply published its limits
            return True
        return self.shared
