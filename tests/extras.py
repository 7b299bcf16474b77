"""Skipping the tests of an optional extra that is not installed, without importing it.

``pytest.importorskip`` imports the package to find out whether it is there; every test worker
collects every module, so the MCP SDK and the web frameworks were imported by workers that
never ran their tests (about a second of CPU per collection). ``skip_without`` only looks the
packages up; the tests import them when they run.
"""

from __future__ import annotations

import importlib.util

import pytest


def skip_without(*packages: str, reason: str) -> None:
    """Skip the calling test module unless every package in ``packages`` can be imported."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{reason} (missing: {', '.join(missing)})", allow_module_level=True)
