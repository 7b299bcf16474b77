"""Sans-IO wire dialects: requests to bytes, bytes to replies. Adds only orjson to the core's
dependencies (a test walks the folder); the Bedrock dialect loads botocore's event-stream
parser on use (the ``bedrock`` extra). Files:

- ``http``: HTTP request/response values, headers, time limits.
- ``sse``: the WHATWG server-sent-events decoder.
- ``classify``: the one table from HTTP answers and transport failures to ``ModelError``.
- ``codec``: the :class:`Codec` protocol, stream deltas and the :class:`Backend` value.
- ``exchange``: :class:`Exchange`, the outcome of one attempt at a model request.
- ``common``: what the dialects share (sampling parameters, wire counts, a tool use's input,
  plain JSON containers).
- ``dialects``: the OpenAI-compatible dialects: one :class:`Dialect` record each (every fact
  about an engine), option validation and the extras each puts on the wire.
- ``openai``: the OpenAI-compatible codec (chat completions, streamed and not).
- ``prefix_blocks``: an engine's prefix-cache block size and its tokenization of a chat
  request, the wire of block alignment.
- ``anthropic``: the Anthropic Messages codec.
- ``bedrock``: the AWS Bedrock Converse codec and its event-stream decoder.
- ``ratelimits``: the ``x-ratelimit-*`` / ``anthropic-ratelimit-*`` reply headers, read.
- ``redact``: keeping secrets out of error texts.
- ``reply_limit``: the cap on the bytes of one reply body.
- ``jsonbody``: :func:`loads` for reply documents, in memory proportional to their size
  (orjson below 256 KiB, the ``json`` module above, orjson's rules either way).
- ``serde``: :func:`dumps` / :func:`loads`, the JSON encoding of every agentcore value.
- ``values``: :func:`json_value`, the one JSON form of user values (outputs, tool results).
"""
