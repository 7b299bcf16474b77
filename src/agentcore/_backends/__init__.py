"""Backends: a URL, or a configured :class:`Backend`, plus its options, to a model client stack.

Between the codecs and transports below and the driver above: the driver runs runs against
the clients this layer opens, and never assembles one itself. Imports ``_core``, ``_codecs``,
``_observe``, ``_transports`` and ``_sim`` (``sim://`` starts the embedded simulator), never
the layers above (``_driver``, ``_tasks``, ``_distributed``, ``_cli``). Files:

- ``backend``: :class:`Backend`, a configured backend as a value (where it is, its codec, its
  transport, its own options as typed fields: service tier, Batch API settings).
- ``options``: a backend's options by name and their checks, one table for every entry point
  (``wire.backend``, ``open_driver``'s keywords, ``DriverOptions.backend_options``,
  ``Fallback.options``, the CLI).
- ``urls``: a backend URL (``vllm://``, ``https://…``, ``bedrock://``, ``openai-batch://``)
  to its :class:`Backend`: codec, transport settings and credentials
  (:func:`agentcore.wire.backend`).
- ``stack``: configuring a driver's backends, then opening the model client of each (and the
  cost ledger), closed with the caller's exit stack.
- ``tiers``: the cost ledger (prices, an exact cost), and the tiered client of a backend with
  a service tier.
- ``batch``: Batch API backends' client and slots.
- ``fallback``: :class:`Fallback`, a fallback backend as a value, and the names of a driver's
  backends.
"""
