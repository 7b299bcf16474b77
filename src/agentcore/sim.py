"""The embedded simulated backend (``sim://``): an OpenAI-compatible server on loopback.

``open_driver("sim://")`` and ``run_batch(..., backend="sim://")`` start one for you; use this
namespace to start one yourself (:func:`open_sim_server` inside trio, :func:`run_sim_server`
as a blocking process entry), to tune it (:class:`SimConfig`) or to read what it saw
(:class:`SimStatistics`). See ``docs/sim.md``.
"""

from __future__ import annotations

from ._public import publish as _publish
from ._sim import SimConfig as SimConfig
from ._sim import SimServer as SimServer
from ._sim import SimStatistics as SimStatistics
from ._sim import open_sim_server as open_sim_server
from ._sim import run_sim_server as run_sim_server

__all__ = ["SimConfig", "SimServer", "SimStatistics", "open_sim_server", "run_sim_server"]

_publish(__name__, __all__, globals())
