"""Backends: a URL, or a configured :class:`Backend`, plus its options, to a model client stack.

Between the codecs and transports below and the driver above: the driver runs runs against
the clients this layer opens, and never assembles one itself. Imports ``_core``, ``_codecs``,
``_observe``, ``_transports`` and ``_sim`` (``sim://`` starts the embedded simulator), never
the layers above (``_driver``, ``_tasks``, ``_distributed``, ``_cli``). Files:

- ``backend``: :class:`Backend`, a configured backend as a value (where it is, its codec, its
  transport, its own options).
- ``urls``: a backend URL (``vllm://``, ``https://…``, ``bedrock://``, ``openai-batch://``)
  to its :class:`Backend`: codec, transport settings and credentials
  (:func:`agentcore.wire.backend`).
- ``stack``: opening the model client of a backend and of each fallback backend, closed with
  the caller's exit stack.
- ``tiers``: the service-tier and price options, and the tiered client of a backend.
- ``batch``: Batch API backends' options, client, slots and ledger.
- ``fallback``: :class:`Fallback`, a fallback backend as a value, and the names of a driver's
  backends.
"""
