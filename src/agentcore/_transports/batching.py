"""A model client that sends model calls through a provider's Batch API, one hop at a time.

Theory of operation
-------------------
:meth:`BatchModelClient.exchange` encodes the call with the backend's codec, exactly as the
synchronous endpoint would get it, and puts it into the open *hop* (the next batch). The hop
gathers calls until none has arrived for ``gather`` seconds, or until it holds the Batch
API's most requests or bytes (the next call then opens the next hop). Then the hop is
written to the journal, submitted, and polled with back-off (``poll`` seconds at first,
growing by half up to ``poll_max``) until it ends; its results are journaled and each goes
back to its call, decoded by the same codec as a synchronous reply.

Nothing runs in the background: every call waiting on a hop tries to take the hop's lock, and
whoever holds it moves the hop one step on (gather, submit, one poll, results). A waiter that
is cancelled lets go of the lock and another one carries on; a call cancelled before its hop
is submitted leaves the hop.

A resumed journal (:mod:`agentcore._transports.batch_journal`) answers a call whose body an
ended hop answered with that answer, and makes a call whose body is in a submitted hop wait
for that batch: a restarted agent replays its earlier turns without a model request, and no
hop is submitted twice.

A line that failed (an error status, or expired, cancelled, missing) is a ``ModelFailed`` as
the synchronous endpoint's error would be: the retry layer sends it again, into a later hop.
A submission that fails fails the calls of its hop the same way.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict, deque

import attrs
import trio

from .._codecs.classify import transport_failure, unusable_request
from .._codecs.codec import Codec
from .._codecs.exchange import Exchange
from .._codecs.http import HttpRequest
from .._core.cost import CostLedger
from .._core.errors import AgentcoreError, TransportError
from .._core.events import CallModel, ModelFailed, ModelResponded
from .batch_api import BatchApi, BatchState, LineResult
from .batch_journal import BatchJournal, JournalHop
from .protocol import Transport

__all__ = ["BatchModelClient", "HopView"]

_log = logging.getLogger("agentcore.batch")


@attrs.frozen
class HopView:
    """A hop in flight, for progress displays."""

    number: int
    """The hop's number in this process (1, 2...)."""
    batch_id: str | None
    """The provider's batch id (``None`` while gathering or submitting)."""
    status: str
    """``gathering``, ``submitting``, or the provider's status word."""
    since: float
    """Wall-clock time (``time.time()``) the hop entered that status."""
    requests: int
    """Calls in the hop."""
    done: int
    """Lines the provider reports answered."""


class _Item:
    __slots__ = ("answer", "custom_id", "done", "failure", "key", "request")

    def __init__(self, key: str, request: HttpRequest) -> None:
        self.key = key
        self.request = request
        self.custom_id = ""
        self.answer: LineResult | None = None
        self.failure: TransportError | None = None
        self.done = trio.Event()


class _Hop:
    def __init__(self, number: int, tag: str) -> None:
        self.number = number
        self.tag = tag
        self.items: dict[str, _Item] = {}
        self.lines: dict[str, bytes] = {}
        self.size = 0
        self.counts: defaultdict[str, int] = defaultdict(int)
        self.closed = False
        self.batch_id: str | None = None
        self.sample: HttpRequest | None = None
        self.state = BatchState("gathering", False)
        self.status = "gathering"
        self.since = time.time()
        self.last_arrival = trio.current_time()
        self.wait = 0.0
        self.finished = False
        self.lock = trio.Lock()

    def set_status(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self.since = time.time()


def _key(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()


class BatchModelClient:
    """A :class:`~agentcore._transports.model_client.ModelClient` over a Batch API (see the
    module docstring).

    Args:
        codec: the backend's wire dialect (encodes each call, decodes each result).
        transport: moves the Batch API's requests (owned: :meth:`aclose` closes it).
        api: the provider's Batch API.
        journal: where hops are recorded (and resumed from).
        model: the model name the ledger prices.
        ledger: counts each answered call at the ``batch`` price tier.
        gather: seconds without a new call after which a hop is submitted.
        poll: seconds before the first poll of a submitted hop.
        poll_max: the longest wait between polls.
    """

    def __init__(
        self,
        codec: Codec,
        transport: Transport,
        api: BatchApi,
        journal: BatchJournal,
        model: str,
        *,
        ledger: CostLedger | None = None,
        gather: float = 1.0,
        poll: float = 5.0,
        poll_max: float = 60.0,
    ) -> None:
        self.codec = codec
        self.transport = transport
        self.api = api
        self.journal = journal
        self.model = model
        self.ledger = ledger
        self.gather = gather
        self.poll = poll
        self.poll_max = poll_max
        self._numbers = 0
        self._open: _Hop | None = None
        self._hops: dict[int, _Hop] = {}
        self._waiting: defaultdict[str, deque[tuple[_Hop, str]]] = defaultdict(deque)
        self.submitted = 0
        """Hops submitted by this process."""
        for pending in journal.pending:
            self._adopt(pending)
        journal.pending = []

    @property
    def max_requests(self) -> int:
        """The most calls one hop holds."""
        return self.api.max_requests

    def hops(self) -> list[HopView]:
        """The hops in flight now, oldest first."""
        return [
            HopView(h.number, h.batch_id, h.status, h.since, len(h.items), h.state.done)
            for h in self._hops.values()
        ]

    def _new_hop(self, tag: str | None = None) -> _Hop:
        self._numbers += 1
        hop = _Hop(self._numbers, tag or self.journal.new_tag())
        self._hops[hop.number] = hop
        return hop

    def _adopt(self, pending: JournalHop) -> None:
        """A hop submitted before a restart: its lines wait for calls to claim them."""
        hop = self._new_hop(pending.tag)
        hop.closed = True
        hop.batch_id = pending.batch_id
        hop.set_status("resumed")
        hop.wait = self.poll
        for custom_id in pending.ids:
            self._waiting[custom_id.rsplit("-", 1)[0]].append((hop, custom_id))
            hop.lines[custom_id] = b""

    # -- the exchange -------------------------------------------------------------------------

    async def exchange(self, call: CallModel) -> Exchange:
        """One call, answered through a batch (see :meth:`ModelClient.exchange`)."""
        try:
            request = self.codec.encode(call, stream=False)
        except AgentcoreError as exc:
            return Exchange(ModelFailed(call.request_id, unusable_request(str(exc))))
        key = _key(request.body)
        answer = self.journal.take_answer(key)
        if answer is not None:
            return self._decoded(call, answer)
        item = _Item(key, request)
        hop = self._claim(item) or self._enqueue(item)
        try:
            while not item.done.is_set():
                async with hop.lock:
                    if not item.done.is_set():
                        await self._advance(hop)
        finally:
            if not hop.closed and not item.done.is_set():
                hop.items.pop(item.custom_id, None)
                hop.size -= len(hop.lines.pop(item.custom_id, b""))
        if item.failure is not None:
            return Exchange(ModelFailed(call.request_id, transport_failure(item.failure)))
        assert item.answer is not None
        return self._decoded(call, item.answer)

    def _decoded(self, call: CallModel, answer: LineResult) -> Exchange:
        status, body = answer
        event = self.codec.decode(call.request_id, status, (), body)
        if isinstance(event, ModelResponded) and self.ledger is not None:
            self.ledger.add(self.model, "batch", event.usage, call.hints.session_id or None)
        return Exchange(event)

    def _claim(self, item: _Item) -> _Hop | None:
        """The resumed hop holding ``item``'s body, which it joins."""
        found = self._waiting.get(item.key)
        if not found:
            return None
        hop, custom_id = found.popleft()
        if not found:
            del self._waiting[item.key]
        item.custom_id = custom_id
        hop.items[custom_id] = item
        return hop

    def _enqueue(self, item: _Item) -> _Hop:
        hop = self._open
        if hop is None or hop.closed:
            hop = self._open = self._new_hop()
        number = hop.counts[item.key]
        hop.counts[item.key] = number + 1
        item.custom_id = f"{item.key}-{number}"
        line = self.api.line(item.custom_id, item.request)
        if hop.items and (
            len(hop.items) >= self.api.max_requests or hop.size + len(line) > self.api.max_bytes
        ):
            hop.closed = True  # full: its waiters submit it; this call opens the next
            hop = self._open = self._new_hop()
            hop.counts[item.key] = 1
            item.custom_id = f"{item.key}-0"
            line = self.api.line(item.custom_id, item.request)
        hop.items[item.custom_id] = item
        hop.lines[item.custom_id] = line
        hop.size += len(line)
        hop.sample = hop.sample or item.request
        hop.last_arrival = trio.current_time()
        return hop

    # -- moving a hop on ----------------------------------------------------------------------

    async def _advance(self, hop: _Hop) -> None:
        """One step of ``hop`` (the caller holds its lock)."""
        if hop.batch_id is None:
            await self._gather_and_submit(hop)
            return
        await trio.sleep(hop.wait)
        hop.wait = min(max(hop.wait * 1.5, self.poll), self.poll_max)
        sample = hop.sample or next(iter(hop.items.values())).request
        try:
            state = await self.api.poll(self.transport, sample, hop.batch_id)
        except TransportError as exc:
            _log.warning("hop %d: polling batch %s failed: %s", hop.number, hop.batch_id, exc)
            return
        hop.state = state
        hop.set_status(state.status)
        if not state.ended:
            return
        ids = list(hop.lines)
        try:
            lines = await self.api.results(self.transport, sample, state, ids)
        except TransportError as exc:
            _log.warning("hop %d: reading batch %s failed: %s", hop.number, hop.batch_id, exc)
            return
        self.journal.ended(hop.tag, lines)
        self._finish(hop, lines)

    async def _gather_and_submit(self, hop: _Hop) -> None:
        while not hop.closed:
            quiet = hop.last_arrival + self.gather - trio.current_time()
            if quiet <= 0:
                break
            await trio.sleep(quiet)
        hop.closed = True
        if self._open is hop:
            self._open = None
        if not hop.items:
            self._hops.pop(hop.number, None)
            return
        hop.set_status("submitting")
        ids = list(hop.items)
        lines = [hop.lines[i] for i in ids]
        assert hop.sample is not None
        self.journal.intent(hop.tag, ids)
        try:
            batch_id = await self.api.submit(self.transport, hop.sample, lines, hop.tag)
        except TransportError as exc:
            _log.warning("hop %d: submitting %d requests failed: %s", hop.number, len(ids), exc)
            for item in hop.items.values():
                item.failure = exc
                item.done.set()
            self._hops.pop(hop.number, None)
            return
        self.journal.submitted(hop.tag, batch_id)
        self.submitted += 1
        hop.batch_id = batch_id
        hop.wait = self.poll
        hop.set_status("submitted")
        _log.info("hop %d: batch %s submitted (%d requests)", hop.number, batch_id, len(ids))

    def _finish(self, hop: _Hop, lines: dict[str, LineResult]) -> None:
        for custom_id, answer in lines.items():
            item = hop.items.get(custom_id)
            if item is not None:
                item.answer = answer
                item.done.set()
            else:
                self.journal.keep_answer(custom_id, answer)
        for key in [k for k, found in self._waiting.items() if any(h is hop for h, _ in found)]:
            self._waiting[key] = deque((h, c) for h, c in self._waiting[key] if h is not hop)
            if not self._waiting[key]:
                del self._waiting[key]
        hop.finished = True
        self._hops.pop(hop.number, None)

    async def aclose(self) -> None:
        """Close the transport."""
        await self.transport.aclose()
