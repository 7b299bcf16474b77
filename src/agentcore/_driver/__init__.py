"""The trio driver: it performs the effects of many agent loops against one backend.

Imports the layers below it (``_core``, ``_codecs``, ``_observe``, ``_transports``, ``_sim``,
``_tools``, ``_backends``), never the ones above (``_tasks``, ``_distributed``, ``_cli``). The
model clients it drives come assembled from ``_backends``. Files:

- ``driver``: :class:`Driver`, the facade users hold (run, stream, watch, generate,
  call_model, cancel, statistics).
- ``open``: :func:`open_driver`, which opens a driver around the client stack of a backend.
- ``options``: :class:`DriverOptions`, the driver's options as one checked value that every
  entry point takes.
- ``runner``: the per-run runner: drives one loop's effects, and ends its run with a result.
- ``journaling``: the driver's side of the step journal: steps journaled at a run's
  boundaries, its result at its end.
- ``scheduler``: the stream scheduler: feeds a result stream's runs, parks them for slots and
  carries them on.
- ``runs``: the bookkeeping of runs in progress, and the queue and stream of a batch's results.
- ``feed``: the worker pool, ready line and parked deadlines of one result stream.
- ``requests``: the model request path (slot, rate budget, attempts, retries).
- ``fallback``: the request path of model fallback across backends.
- ``breaker``: the trio side of a backend's circuit breaker (model fallback).
- ``generate``: one-shot generation without an agent loop.
- ``observed``: the driver's side of step events (deltas, tool calls reported, a run's end).
- ``slot_limiter``: the trio side of the inference-slot policy.
- ``rate_limiter``: the trio side of per-minute rate budgets.
- ``limit_scope``: whose refusal a 429 is: the evidence that a backend's rate limits are
  shared by every request (configured, published by a successful reply, documented by the
  provider), which both the rate limiter's hold and a distributed batch's pause require.
- ``budget_guard``: a batch's usage budget, enforced as runs report usage.
- ``stats``: the frozen statistics values.
"""
