"""The batch layer: tasks, batches of agents, one watched agent and the results file.

Imports everything below it (the driver and its layers), never ``_distributed`` or ``_cli``.
Files:

- ``task``: :class:`Task`, an agent's job and how one input becomes one loop.
- ``taskfile``: TOML task files.
- ``batch``: ``run_batch``, ``open_batch`` and ``map_reduce``.
- ``align``: padding a batch's shared prefix to the engine's prefix-cache blocks.
- ``warmup``: warming a server's prefix cache before the fan-out.
- ``agent``: :class:`Agent`, one agent, run or watched.
- ``results_file``: the results file of ``agentcore run`` (its records, read and written).
- ``fingerprint``: what makes two tasks run agents the same way (compared by journals).
- ``journal``: the step journal on this machine: one SQLite file, commits grouped.
- ``resume``: a batch's runs restored from its journal, and results as the journal keeps them.
- ``locks``: one writer per results file or journal (``flock``).
"""
