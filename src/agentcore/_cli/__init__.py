"""The ``agentcore`` command line, the top floor. Files:

- ``main``: the parser and the commands (``run``, ``demo``, ``trace``, ...); the console
  script ``agentcore`` is :func:`main.main`.
- ``distributed``: ``agentcore worker`` and ``agentcore run --queue``.
- ``demo``: the task behind ``agentcore demo``.
- ``logs``: the command line's log handler (agentcore's warnings and a worker's progress on
  stderr).
- ``batch_progress``: ``run --backend openai-batch://``: the journal beside the results file
  and the lines saying which hop waits, and since when.
"""
