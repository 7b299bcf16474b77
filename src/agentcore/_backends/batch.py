"""Batch API backends in a backend stack: their options, their client, their slots and their ledger.

``open_driver("openai-batch://", journal="out.batch-journal.jsonl", gather=1.0, poll=5.0)``:
:func:`split_batch` takes the batch options out of a backend's options before the backend is
configured, :func:`batch_client` makes the
:class:`~agentcore._transports.batching.BatchModelClient` over the backend's codec and
transport. A batch hop is not bounded by ``max_inflight``: every waiting agent's call must be
able to join the hop, so the driver's slot limiter admits up to the Batch API's most requests
per batch (:func:`batch_slots`); the batch itself is the unit of concurrency, and the
provider's queue its limit. Answers are priced at the ledger's ``batch`` tier (the driver
always keeps a ledger for a batch backend: :func:`batch_ledger`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._core.cost import CostLedger, merge_prices
from .._core.errors import ConfigError
from .._transports.batch_api import ANTHROPIC_BATCHES, OPENAI_BATCHES
from .._transports.batch_journal import BatchJournal
from .._transports.batching import BatchModelClient
from .._transports.model_client import ModelClient
from .._transports.protocol import Transport
from .backend import Backend
from .urls import is_batch

__all__ = ["BATCH_OPTIONS", "batch_client", "batch_ledger", "batch_slots", "split_batch"]

BATCH_OPTIONS: Final = ("journal", "gather", "poll", "poll_max")
"""Options of a Batch API backend: the journal file, the gather window, the poll back-off."""


def split_batch(
    target: object, options: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """A batch backend's batch options (``None`` for another backend) and the others.

    Raises:
        ConfigError: a batch option on another backend, or a malformed one.
    """
    rest = dict(options)
    mine: dict[str, Any] = {name: rest.pop(name) for name in BATCH_OPTIONS if name in rest}
    if not is_batch(target):
        if mine:
            raise ConfigError(f"{sorted(mine)} apply to openai-batch:// and anthropic-batch://")
        return None, rest
    for name in ("gather", "poll", "poll_max"):
        value = mine.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value < 0
        ):
            raise ConfigError(f"{name} must be a number of seconds >= 0, got {value!r}")
    return mine, rest


def batch_client(  # noqa: PLR0917 - the call site's values, in its order
    configured: Backend,
    transport: Transport,
    settings: Mapping[str, Any],
    ledger: CostLedger | None,
    model: str,
    stream: bool | None = None,
) -> BatchModelClient:
    """The Batch API client of ``configured`` over ``transport``.

    Raises:
        ConfigError: ``stream=True`` (a batch answers whole replies), or the journal cannot be
            read.
    """
    if stream:
        raise ConfigError(f"{configured.name}:// answers whole replies; stream=True does not apply")
    api = OPENAI_BATCHES if configured.name == "openai-batch" else ANTHROPIC_BATCHES
    journal = BatchJournal(settings.get("journal"))
    timing = {k: float(settings[k]) for k in ("gather", "poll", "poll_max") if k in settings}
    codec = configured.codec
    return BatchModelClient(codec, transport, api, journal, model, ledger=ledger, **timing)


def batch_slots(client: ModelClient, max_inflight: int) -> int:
    """The slot limit of a driver whose primary client is ``client`` (module docstring)."""
    if isinstance(client, BatchModelClient):
        return max(max_inflight, client.max_requests)
    return max_inflight


def batch_ledger(target: object, ledger: CostLedger | None) -> CostLedger | None:
    """``ledger``, or a ledger with the default prices for a batch backend without one."""
    if ledger is None and is_batch(target):
        return CostLedger(merge_prices(None))
    return ledger
