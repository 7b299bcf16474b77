"""HTTP transports and model clients: the only code that opens sockets. trio + h11 + httpx.

Imports ``_core``, ``_codecs`` and ``_observe``. Files:

- ``protocol``: the :class:`Transport` protocol every transport implements.
- ``lean``: HTTP/1.1 on h11 and trio sockets, one connection per inference slot (self-hosted
  servers); the socket side.
- ``http11``: the lean transport's sans-IO HTTP/1.1 framing: :class:`Origin`, request bytes,
  the response reader (one h11 event pump).
- ``chunked``: the lean transport's decoder of chunked bodies (sans-IO; h11's rules, without
  an event per chunk).
- ``hosted``: httpx, for hosted APIs (HTTP/2, proxies, the system's trust store).
- ``factory``: picking a transport for a base URL.
- ``sigv4``: AWS credentials and SigV4 signing for Bedrock (the ``bedrock`` extra).
- ``model_client``: :class:`ModelClient`, one model exchange over codec + transport.
- ``tiered``: a model client sending each request on a service tier (flex, then standard on
  a capacity refusal) and counting each answer at the tier that billed it.
- ``deltas``: deltas of a streamed reply, from a model client to whoever watches.
- ``batch_api``: the providers' Batch APIs on the wire (OpenAI's files + batches, Anthropic's
  message batches): submit, poll, stream results line by line, cancel, clean up.
- ``batch_journal``: the journal of a batch backend's hops (what was submitted, its batch id,
  its answers, how it ended), so a restarted process resumes a hop instead of submitting it
  again; answers are read back from it by offset.
- ``batching``: a model client sending model calls through a Batch API, one hop at a time:
  packing, splitting, cancelling and the hops' progress.
"""
