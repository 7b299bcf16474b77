"""The sans-IO core: values, the agent loop and pure policies. No I/O, no clock, no randomness.

Everything under this folder imports only the standard library, attrs and cattrs (a test walks
the folder and fails on anything else). Files:

- ``errors``: the exception tree (:class:`AgentcoreError` and its subclasses).
- ``validators``: attrs validators and checks that raise :class:`ConfigError`.
- ``messages``: chat messages, tool specs, model parameters, usage, serving hints.
- ``events``: events into the loop, effects out of it, typed errors and abort reasons.
- ``results``: what a run ends with (:class:`Result`, :class:`RunTimings`, ``Status``).
- ``schema``: JSON schemas derived from Python types, validation against them (cattrs), and
  the fields of a structured type.
- ``config``: :class:`LoopConfig`, one run's immutable configuration, and the id formulas.
- ``loop``: :class:`AgentLoop`, the state machine itself, with its snapshots and statistics.
- ``journal``: the step journal: what a run's journal holds, how a run is restored from it
  (``replay``), and the one interface its stores implement (``StepJournal``).
- ``singleflight``: the pure table that coalesces identical tool calls.
- ``replay``: reuse of tool results across runs: the key rule (declared context fields, tool
  history) and the bounded result store.
- ``caps``: concurrency caps for tool calls: the FIFO cap queue and the per-turn caps.
- ``slots``: the pure slot queue (FIFO/priority) and the AIMD adaptive limit.
- ``budgets``: usage limits per run and per batch, and the pure checks against them.
- ``error_policy``: one row per error kind: retried, final when repeated, slows down, falls
  over, pauses the fleet, fatal at warm-up; every layer reads it.
- ``retry``: the retry policy (which failures, how long to back off, the repeat rule).
- ``rejection``: the rule that ends a run whose server keeps refusing its request the same way.
- ``fallback``: the pure policies of model fallback across backends (which failures go on to
  the next backend; each backend's circuit breaker).
- ``service_tier``: the pure policy of service tiers (standard, flex, flex then standard) and
  what a refusal on flex means.
- ``cost``: prices per model and tier (a default table the user overrides) and the cost
  ledger: tokens per tier, cost, saving against standard.
- ``tokenbucket``: the one token bucket (kept as GCRA's single number) under every rate limit:
  model requests and tokens, tool calls, the simulator's limits.
- ``ratebudget``: per-minute request and token budgets (reservations, usage corrections,
  limits learned from headers).
- ``token_estimate``: a request's tokens before it is sent (linear in its text, framing, tool
  specs and images, fitted to the servers' counts) and the estimate's errors per request
  shape; the rate budget and a batch's token budget both reserve with it.
- ``fleetbudget``: the rate budget a fleet of distributed workers shares (the policy the
  batch's server-side script runs: grants for a line of requests up to a horizon, learned
  limits, corrections, holds) and a worker's local share when the server cannot be reached.
"""
