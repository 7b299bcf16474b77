"""Batch API backends in a backend stack: their client and their slots.

``open_driver("openai-batch://", journal="out.batch-journal.jsonl", gather=1.0, poll=5.0)``:
the settings are the backend's :class:`~agentcore.wire.BatchSettings`
(:attr:`~agentcore.wire.Backend.batch`), and :func:`batch_client` makes the
:class:`~agentcore._transports.batching.BatchModelClient` over the backend's codec and
transport. A batch hop is not bounded by ``max_inflight``: every waiting agent's call must be
able to join the hop, so the driver's slot limiter admits up to the Batch API's most requests
per batch (:func:`batch_slots`); the batch itself is the unit of concurrency, and the
provider's queue its limit. Answers are priced at the ledger's ``batch`` tier (a driver
always keeps a ledger for a batch backend: :func:`~agentcore._backends.tiers.ledger_for`).
"""

from __future__ import annotations

from .._core.cost import CostLedger
from .._core.errors import ConfigError
from .._transports.batch_api import ANTHROPIC_BATCHES, OPENAI_BATCHES
from .._transports.batch_journal import BatchJournal
from .._transports.batching import BatchModelClient
from .._transports.model_client import ModelClient
from .._transports.protocol import Transport
from .backend import Backend

__all__ = ["batch_client", "batch_slots", "is_batch_client"]


def batch_client(
    configured: Backend,
    transport: Transport,
    ledger: CostLedger | None,
    stream: bool | None = None,
) -> BatchModelClient:
    """The Batch API client of ``configured`` (a backend with :attr:`Backend.batch`) over
    ``transport``.

    Raises:
        ConfigError: ``stream=True`` (a batch answers whole replies), or the journal cannot be
            read.
    """
    settings = configured.batch
    if settings is None:  # pragma: no cover - only called for a batch backend
        raise ConfigError(f"the {configured.name} backend is no Batch API backend")
    if stream:
        raise ConfigError(f"{configured.name}:// answers whole replies; stream=True does not apply")
    api = OPENAI_BATCHES if configured.name == "openai-batch" else ANTHROPIC_BATCHES
    return BatchModelClient(
        configured.codec,
        transport,
        api,
        BatchJournal(settings.journal, replace=settings.replace_journal),
        configured.model,
        ledger=ledger,
        gather=settings.gather,
        poll=settings.poll,
        poll_max=settings.poll_max,
        max_reply_bytes=configured.max_reply_bytes,
        max_enqueued_tokens=settings.max_enqueued_tokens,
        clean_up=settings.clean_up,
    )


def is_batch_client(client: object) -> bool:
    """Whether ``client`` sends its calls through a Batch API."""
    return isinstance(client, BatchModelClient)


def batch_slots(client: ModelClient, max_inflight: int) -> int:
    """The slot limit of a route whose client is ``client`` (module docstring)."""
    if isinstance(client, BatchModelClient):
        return max(max_inflight, client.max_requests)
    return max_inflight
