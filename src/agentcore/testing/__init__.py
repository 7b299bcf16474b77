"""Tools for testing code built on agentcore.

- :mod:`agentcore.testing.strategies`: Hypothesis strategies for messages, tool calls, events,
  effects and model replies, for property tests of policies, schedulers and drivers. Import it
  explicitly; it needs ``hypothesis`` installed, this package does not.

Nothing here performs I/O or reads a clock, so tests built on it are deterministic.
"""

__all__: list[str] = []
