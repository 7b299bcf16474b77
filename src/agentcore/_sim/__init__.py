"""The embedded simulated backend: an OpenAI-compatible server on loopback (``sim://``).

Its model follows the request (tool calls with schema-valid arguments on early turns, JSON
valid against the requested schema on the last) and its latency model imitates a
prefix-caching inference server (batch slots, prefill per uncached token, decode per output
token, a block prefix cache with LRU eviction). Modules:

- ``_config``: :class:`SimConfig` and the timing it implies;
- ``_tokens``: the approximate tokenizer; ``_template``: the chat template;
- ``_prefix_cache``: chained block names and the LRU block cache;
- ``_request``: request checking; ``_schema_values``: JSON values from a JSON schema;
- ``_policy``: what the model answers and which requests fail on purpose;
- ``_responses``: wire bodies and stream frames; ``_engine``: slots and timing (trio);
- ``_server``: the trio + h11 HTTP server.
"""

from ._config import SimConfig as SimConfig
from ._server import SimServer as SimServer
from ._server import SimStatistics as SimStatistics
from ._server import open_sim_server as open_sim_server
from ._server import run_sim_server as run_sim_server

__all__ = ["SimConfig", "SimServer", "SimStatistics", "open_sim_server", "run_sim_server"]
