"""The embedded simulated backend: an OpenAI-compatible server on loopback (``sim://``).

Its model follows the request (tool calls with schema-valid arguments on early turns, JSON
valid against the requested schema on the last) and its latency model imitates a
prefix-caching inference server (batch slots, prefill per uncached token, decode per output
token, a block prefix cache with LRU eviction). Its public surface is :mod:`agentcore.sim`.
Imports ``_core`` only. Files:

- ``config``: :class:`SimConfig` and the timing it implies.
- ``tokens``: the approximate tokenizer.
- ``template``: the chat template.
- ``prefix_cache``: chained block names and the LRU block cache.
- ``request``: request checking.
- ``schema_values``: JSON values from a JSON schema.
- ``policy``: what the model answers and which requests fail on purpose.
- ``prose``: plain-text answers, short sentences made of the prompt's content words.
- ``responses``: wire bodies and stream frames.
- ``engine``: slots and timing (trio).
- ``server``: the trio + h11 HTTP server.
- ``ratelimit``: requests/tokens per minute (on the core's token bucket), 429s and the
  ``x-ratelimit-*`` headers.
- ``tiers``: the ``service_tier`` of a request; flex requests refused for capacity or model.
- ``batches``: the Batch APIs (OpenAI's files and batches, Anthropic's message batches) as
  the providers document them, in simulated time: every status, expiry, limits, retention,
  prompt caching, refused keys.
"""

from .config import SimConfig as SimConfig
from .server import SimServer as SimServer
from .server import SimStatistics as SimStatistics
from .server import open_sim_server as open_sim_server
from .server import run_sim_server as run_sim_server

__all__ = ["SimConfig", "SimServer", "SimStatistics", "open_sim_server", "run_sim_server"]
