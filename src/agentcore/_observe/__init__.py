"""Seeing what a run did. Private; the public names are re-exported by ``agentcore``.

Imports ``_core`` and ``_codecs`` only, so every layer above can report to it. Files:

- ``steps``: the step events of a run (the event vocabulary), step sinks and channels.
- ``observer``: the hooks the driver calls (runs, slot waits, attempts, back-offs, tool
  executions) and the fan-out to several observers.
- ``log``: the standard-library loggers, one per layer, silent by default.
- ``trace``: a Chrome trace-event JSON file written as the batch runs (one track per slot).
- ``render``: a trace file to a self-contained SVG or HTML timeline.
- ``otel``: OpenTelemetry spans with the GenAI semantic conventions (``agentcore[otel]``).
"""
