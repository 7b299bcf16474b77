"""Seeing what a run did. Private; the public names are re-exported by ``agentcore``.

Imports ``_core`` and ``_codecs`` only, so every layer above can report to it. Files:

- ``steps``: the step events of a run (the one event vocabulary), the sink protocol, the
  fan-out to several sinks, and the channel behind ``watch``.
- ``log``: the standard-library loggers, one per layer, silent by default.
- ``log_sink``: the ``agentcore.driver`` / ``agentcore.tools`` log lines, written by a sink.
- ``trace``: a sink writing a Chrome trace-event JSON file as the batch runs (one track per
  slot).
- ``render``: a trace file to a self-contained SVG or HTML timeline.
- ``otel``: a sink making OpenTelemetry spans with the GenAI semantic conventions
  (``trio-agentcore[otel]``).
"""
