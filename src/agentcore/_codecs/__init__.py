"""Sans-IO wire dialects: requests to bytes, bytes to replies. Adds only orjson to the core's
dependencies (a test walks the folder). Files:

- ``http``: HTTP request/response values, headers, time limits.
- ``sse``: the WHATWG server-sent-events decoder.
- ``classify``: the one table from HTTP answers and transport failures to ``ModelError``.
- ``codec``: the :class:`Codec` protocol, stream deltas and the :class:`Backend` value.
- ``common``: what the dialects share (sampling parameters, wire counts).
- ``dialects``: the OpenAI-compatible dialects (openai, vllm, sglang, dynamo, sim), options.
- ``openai``: the OpenAI-compatible codec (chat completions, streamed and not).
- ``anthropic``: the Anthropic Messages codec.
- ``ratelimits``: the ``x-ratelimit-*`` / ``anthropic-ratelimit-*`` reply headers, read.
"""
