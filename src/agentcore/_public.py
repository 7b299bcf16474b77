"""Helpers for the public modules: present re-exported objects under their public module."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["publish"]


def publish(module_name: str, names: Iterable[str], namespace: Mapping[str, Any]) -> None:
    """Set ``__module__`` of each class and function in ``names`` to ``module_name``.

    Reprs, docs and tracebacks then show where users import the object from (``agentcore.core.
    AgentLoop``), not the private module that defines it. Aliases (unions, ``Literal``\\ s) are
    left alone. The field types of attrs classes are resolved first, while ``__module__`` still
    names the module whose globals the string annotations refer to.
    """
    for name in names:
        value = namespace[name]
        if inspect.isclass(value) and attrs.has(value):
            attrs.resolve_types(value)
        if inspect.isclass(value) or inspect.isfunction(value):
            with contextlib.suppress(AttributeError, TypeError):  # a builtin-backed object
                value.__module__ = module_name
