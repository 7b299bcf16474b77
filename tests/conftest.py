"""Settings shared by the whole suite.

Hypothesis's per-example deadline is a timing check: on a small machine running the suite in
several worker processes (``make test`` uses pytest-xdist), one slow example under load fails a
property that holds. Timings belong in ``bench/``; properties here check behaviour only, so the
suite's profile has no deadline. Each test still chooses its own ``max_examples``.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("agentcore", deadline=None)
settings.load_profile("agentcore")
