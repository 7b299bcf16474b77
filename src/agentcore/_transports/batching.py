"""A model client that sends model calls through a provider's Batch API, one hop at a time.

Theory of operation
-------------------
:meth:`BatchModelClient.exchange` encodes the call with the backend's codec, exactly as the
synchronous endpoint would get it, and puts it into the open *hop* (the next batch). A hop
moves through these states, one step at a time:

``gathering`` -> ``submitting`` -> (the provider's statuses) -> ended, or split, refused, dead,
cancelled.

- *gathering*: calls join until none has arrived for ``gather`` seconds, or until the hop holds
  the Batch API's most requests or bytes, or, with ``max_enqueued_tokens``, its most estimated
  prompt tokens (the next call then opens the next hop);
- *submitting*: the hop is written to the journal, then submitted. With
  ``max_enqueued_tokens`` it first waits until the prompt tokens of the hops in flight leave
  room for its own. A submission refused with a 413 splits the hop in two halves (new hops,
  submitted at once); any other refusal answers each call with the provider's status and
  message, so that the codec classifies it as it would the synchronous endpoint's (a 401/403
  is final, a 429 is retried with back-off by the retry layer). A submission whose connection
  failed is looked for by its tag where the provider keeps one (OpenAI) before its calls fail
  as a connection error;
- *in flight*: polled with back-off (``poll`` seconds at first, growing by half up to
  ``poll_max``). A poll refused for good (401, 403, 404, 410) kills the hop: its calls fail
  with the provider's status and message, and the journal records it (a resumed run does not
  poll it again). Other poll failures are polled again;
- *ended*: the results are streamed from the provider line by line into the journal (memory
  is bounded by a line; a line longer than the reply cap fails its call as too large), the
  hop's end is recorded, and each call reads its own answer back, decoded by the same codec as
  a synchronous reply. A line the results do not answer (expired, cancelled, missing) comes
  back as a retryable 500 ``server_error``, which the retry layer sends into a later hop. An
  OpenAI batch that ``failed`` for its size (``token_limit_exceeded``, too many requests or
  bytes) is split in two halves that wait for a hop in flight to end before they are
  submitted; one that failed for a line answers that line with a 400 and sends the others
  again.

Nothing runs in the background: every call waiting on a hop tries to take the hop's lock, and
whoever holds it moves the hop one step on. A waiter that is cancelled lets go of the lock and
another one carries on; a call cancelled before its hop is submitted leaves the hop. When the
last call waiting on a submitted hop is cancelled (Ctrl-C, an agent's timeout, a budget that
stops the batch), the batch is cancelled at the provider, and so is every batch still in flight
when the client closes; a journal that ``replace`` s another cancels the batches the other left
in flight. With ``clean_up`` the files (OpenAI) or the batch (Anthropic) of an ended hop are
deleted once its results are in the journal.

The time a call waits inside a hop is reported as the exchange's ``held`` time, which the retry
budget does not count (a hop may last hours; the budget is for the attempts and the time
between them).

A resumed journal (:mod:`agentcore._transports.batch_journal`) answers a call whose body an
ended hop answered with that answer (counted in the ledger as replayed: billed by the run that
submitted it), and makes a call whose body is in a submitted hop wait for that batch: a
restarted agent replays its earlier turns without a model request, and no hop is submitted
twice. Hop numbers continue from the journal's.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict, deque
from collections.abc import Iterable
from typing import Final

import attrs
import orjson
import trio

from .._codecs.classify import transport_failure, unusable_request
from .._codecs.codec import Codec
from .._codecs.exchange import Exchange
from .._codecs.http import Headers, HttpRequest
from .._core.cost import CostLedger, check_priced
from .._core.errors import AgentcoreError, TransportError
from .._core.events import CallModel, ModelFailed, ModelResponded
from .._core.messages import UserMessage
from .._observe.steps import HopChanged, StepSink
from .batch_api import (
    LINE_TOO_LARGE,
    BatchApi,
    BatchRefused,
    BatchState,
    Channel,
    LineResult,
    split_failed,
    unanswered,
)
from .batch_journal import AnswerRef, BatchJournal, JournalHop
from .protocol import Transport

__all__ = ["BatchModelClient", "HopView"]

_log = logging.getLogger("agentcore.batch")

CANCEL_TIMEOUT: Final = 15.0
"""Seconds a cancel (or a look-up) at the provider may take when a run is being torn down."""
WINDOW: Final = 24 * 3600.0
"""The completion window both providers give a batch."""
_OVERHEAD: Final = 1024
"""Bytes kept free in a batch for what wraps its lines."""
_CHANGES: Final = 4096
"""Hop changes kept for progress displays."""


@attrs.frozen
class HopView:
    """A hop as progress displays show it."""

    number: int
    """The hop's number (continued from the journal after a resume)."""
    batch_id: str | None
    """The provider's batch id (``None`` while gathering or submitting)."""
    status: str
    """``gathering``, ``submitting``, the provider's status word, or what ended it
    (``split``, ``refused``, ``dead``, ``cancelled``)."""
    since: float
    """Wall-clock time (``time.time()``) the hop entered that status."""
    requests: int
    """Lines in the hop."""
    done: int
    """Lines the provider reports answered."""
    failed: int = 0
    """Of those, lines the provider reports failed (or expired, or cancelled)."""
    submitted: float | None = None
    """Wall-clock time the provider accepted the batch."""
    note: str = ""
    """What happened, in words (a submission, an end, a split, a cancel...)."""


class _Item:
    __slots__ = ("answer", "custom_id", "done", "failure", "headers", "hop", "key", "ref",
                 "request")  # fmt: skip

    def __init__(self, key: str, request: HttpRequest) -> None:
        self.key = key
        self.request = request
        self.custom_id = ""
        self.hop: _Hop | None = None
        self.ref: AnswerRef | None = None
        self.answer: LineResult | None = None
        self.headers: Headers = ()
        self.failure: TransportError | None = None
        self.done = trio.Event()


class _Hop:
    def __init__(self, number: int, tag: str) -> None:
        self.number = number
        self.tag = tag
        self.items: dict[str, _Item] = {}
        """The calls waiting on the hop, by custom id."""
        self.lines: dict[str, bytes] = {}
        """Every line of the hop, by custom id (``b""`` for a resumed hop's)."""
        self.size = 0
        self.tokens = 0
        self.counts: defaultdict[str, int] = defaultdict(int)
        self.closed = False
        self.batch_id: str | None = None
        self.sample: HttpRequest | None = None
        self.state = BatchState("gathering", False)
        self.status = "gathering"
        self.since = time.time()
        self.submitted: float | None = None
        self.last_arrival = trio.current_time()
        self.wait = 0.0
        self.finished = False
        self.downloads = 0
        self.alone = False
        """Submit only when no other hop is in flight (a hop failed for its size: the
        provider's enqueued-token limit counts every batch in flight)."""
        self.solo = False
        """No other hop was in flight when it was submitted."""
        self.flying = False
        """Being submitted or submitted (its prompt tokens count as enqueued)."""
        self.death: LineResult | None = None
        self.lock = trio.Lock()
        self.shown = -1

    def set_status(self, status: str) -> bool:
        if status == self.status:
            return False
        self.status = status
        self.since = time.time()
        return True


def _tokens(line: bytes) -> int:
    """A line's prompt tokens, over-estimated: its bytes / 2 (a JSON request holds more than
    2 bytes per token with the tokenizers in use; the simulator's about 2.5)."""
    return len(line) // 2


def _key(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.0f} min"
    return f"{int(minutes // 60)} h {int(minutes % 60):02d} min"


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(seconds))


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.0f} kB"


class BatchModelClient:
    """A :class:`~agentcore._transports.model_client.ModelClient` over a Batch API (see the
    module docstring).

    Args:
        codec: the backend's wire dialect (encodes each call, decodes each result).
        transport: moves the Batch API's requests (owned: :meth:`aclose` closes it). Its own
            reply cap should be off: results files are read line by line under
            ``max_reply_bytes`` instead.
        api: the provider's Batch API.
        journal: where hops are recorded (and resumed from); closed by :meth:`aclose`.
        model: the model name the ledger prices.
        ledger: counts each answered call at the ``batch`` price tier.
        gather: seconds without a new call after which a hop is submitted.
        poll: seconds before the first poll of a submitted hop.
        poll_max: the longest wait between polls.
        max_reply_bytes: the cap on an API answer's body and on one result line (``None``:
            none).
        max_enqueued_tokens: the provider's limit on the prompt tokens of the batches in
            flight for the model (OpenAI's enqueued-token limit; ``None``: not packed for it).
            Prompt tokens are over-estimated as a line's bytes / 2.
        clean_up: delete the files (OpenAI) or the batch (Anthropic) of an ended hop.
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
        max_reply_bytes: int | None = 16 * 1024 * 1024,
        max_enqueued_tokens: int | None = None,
        clean_up: bool = False,
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
        self.max_reply_bytes = max_reply_bytes
        self.max_enqueued_tokens = max_enqueued_tokens
        self.clean_up = clean_up
        self._open: _Hop | None = None
        self._hops: dict[int, _Hop] = {}
        self._waiting: defaultdict[str, deque[tuple[_Hop, str]]] = defaultdict(deque)
        self._replayed: set[AnswerRef] = {
            ref for refs in journal.answered.values() for ref in refs
        }  # answers of an earlier run, billed by it
        self._started = False
        self._start_lock = trio.Lock()
        self._ended = trio.Event()
        self._changes: deque[HopView] = deque(maxlen=_CHANGES)
        self._change_count = 0
        self.steps: StepSink | None = None
        """Where the hops' step events go (``HopChanged``; the driver sets its listeners)."""
        self.submitted = 0
        """Hops submitted by this process."""
        self.cancelled = 0
        """Batches this process cancelled at the provider."""
        if ledger is not None:
            warning = check_priced(ledger, model, ("batch", "standard"))
            if warning is not None:
                _log.warning("%s", warning)
        for pending in journal.pending:
            self._adopt(pending)
        journal.pending = []

    @property
    def max_requests(self) -> int:
        """The most calls one hop holds."""
        return self.api.max_requests

    def hops(self) -> list[HopView]:
        """The hops in flight now, oldest first."""
        return [self._view(h) for h in self._hops.values()]

    def changes(self, seen: int) -> tuple[list[HopView], int]:
        """The hop changes since the ``seen``-th (submissions, status changes, progress by
        tenths, ends, with their notes), and the count to pass next time (the oldest are
        forgotten past a few thousand)."""
        new = min(self._change_count - seen, len(self._changes))
        return list(self._changes)[len(self._changes) - new :], self._change_count

    def _view(self, hop: _Hop, note: str = "") -> HopView:
        state = hop.state
        return HopView(hop.number, hop.batch_id, hop.status, hop.since, len(hop.lines),
                       state.done, state.failed, hop.submitted, note)  # fmt: skip

    def _changed(self, hop: _Hop, note: str = "") -> None:
        self._changes.append(self._view(hop, note))
        self._change_count += 1
        self._step(hop, note, polled=False)

    def _step(self, hop: _Hop, note: str, *, polled: bool) -> None:
        """Tell :attr:`steps` (a trace file, OpenTelemetry, your sink) what ``hop`` did."""
        if self.steps is not None:
            event = HopChanged(None, hop.number, hop.batch_id, hop.status, len(hop.lines),
                               hop.state.done, polled, note, trio.current_time())  # fmt: skip
            self.steps.push(event)

    def _new_hop(self) -> _Hop:
        tag, number = self.journal.new_tag()
        hop = _Hop(number, tag)
        self._hops[hop.number] = hop
        return hop

    def _adopt(self, pending: JournalHop) -> None:
        """A hop submitted before a restart: its lines wait for calls to claim them."""
        hop = _Hop(pending.number, pending.tag)
        self._hops[hop.number] = hop
        hop.closed = True
        hop.flying = True
        hop.batch_id = pending.batch_id
        hop.set_status("resumed")
        hop.wait = self.poll
        for custom_id in pending.ids:
            self._waiting[custom_id.rsplit("-", 1)[0]].append((hop, custom_id))
            hop.lines[custom_id] = b""

    def _channel(self, sample: HttpRequest) -> Channel:
        return Channel(self.transport, sample, self.max_reply_bytes)

    def _sample(self) -> HttpRequest:
        """A request as the codec encodes one (its URL and credentials reach the API)."""
        call = CallModel("agentcore-batch", (UserMessage("."),))
        return self.codec.encode(call, stream=False)

    # -- the exchange -------------------------------------------------------------------------

    async def exchange(self, call: CallModel) -> Exchange:
        """One call, answered through a batch (see :meth:`ModelClient.exchange`)."""
        try:
            request = self.codec.encode(call, stream=False)
        except AgentcoreError as exc:
            return Exchange(ModelFailed(call.request_id, unusable_request(str(exc))))
        began = trio.current_time()
        if not self._started:
            await self._start(request)
        key = _key(request.body)
        ref = self.journal.take_answer(key)
        if ref is not None:
            replayed = ref in self._replayed
            self._replayed.discard(ref)
            return self._decoded(call, self.journal.read(ref), (), replayed=replayed)
        item = _Item(key, request)
        if not self._claim(item):
            self._enqueue(item)
        try:
            while not item.done.is_set():
                hop = item.hop
                assert hop is not None
                async with hop.lock:
                    if not item.done.is_set() and item.hop is hop:
                        await self._advance(hop)
        finally:
            if not item.done.is_set():
                await self._leave(item)
        held = trio.current_time() - began
        if item.failure is not None:
            failed = ModelFailed(call.request_id, transport_failure(item.failure))
            return Exchange(failed, held=held)
        answer = item.answer if item.ref is None else self.journal.read(item.ref)
        assert answer is not None
        return attrs.evolve(self._decoded(call, answer, item.headers), held=held)

    def _decoded(
        self, call: CallModel, answer: LineResult, headers: Headers, *, replayed: bool = False
    ) -> Exchange:
        status, body = answer
        if status == LINE_TOO_LARGE:
            too_large = TransportError("too_large", str(orjson.loads(body)), response_started=True)
            return Exchange(ModelFailed(call.request_id, transport_failure(too_large)))
        event = self.codec.decode(call.request_id, status, headers, body)
        if isinstance(event, ModelResponded) and self.ledger is not None:
            run = call.hints.session_id or None
            self.ledger.add(self.model, "batch", event, run, replayed=replayed)
        return Exchange(event)

    def carry(self, run: str, replies: Iterable[ModelResponded]) -> None:
        """Count in run ``run``'s cost the replies a step journal restored it with (received
        and billed by the process before a resume), apart in the report as replayed."""
        if self.ledger is not None:
            for event in replies:
                self.ledger.add(self.model, "batch", event, run, replayed=True)

    def _claim(self, item: _Item) -> bool:
        """Join the resumed hop holding ``item``'s body, if one does (a dead one answers it
        at once with its refusal)."""
        found = self._waiting.get(item.key)
        if not found:
            return False
        hop, custom_id = found.popleft()
        if not found:
            del self._waiting[item.key]
        if hop.finished and hop.death is None:
            return False  # its batch failed as a whole: the call goes into a new hop
        item.custom_id = custom_id
        item.hop = hop
        if hop.death is not None:
            item.answer = hop.death
            item.done.set()
            return True
        hop.items[custom_id] = item
        return True

    def _enqueue(self, item: _Item) -> None:
        hop = self._open
        if hop is None or hop.closed:
            hop = self._open = self._new_hop()
        line = self._line(hop, item)
        tokens = _tokens(line)
        limit = self.max_enqueued_tokens
        if hop.items and (
            len(hop.lines) >= self.api.max_requests
            or hop.size + len(line) + 1 > self.api.max_bytes - _OVERHEAD
            or (limit is not None and hop.tokens + tokens > limit)
        ):
            hop.closed = True  # full: its waiters submit it; this call opens the next
            hop.counts[item.key] -= 1
            hop = self._open = self._new_hop()
            line = self._line(hop, item)
        hop.items[item.custom_id] = item
        hop.lines[item.custom_id] = line
        hop.size += len(line) + 1
        hop.tokens += tokens
        hop.sample = hop.sample or item.request
        hop.last_arrival = trio.current_time()
        item.hop = hop

    def _line(self, hop: _Hop, item: _Item) -> bytes:
        number = hop.counts[item.key]
        hop.counts[item.key] = number + 1
        item.custom_id = f"{item.key}-{number}"
        return self.api.line(item.custom_id, item.request)

    async def _leave(self, item: _Item) -> None:
        """``item``'s call was cancelled: it leaves its hop, and a submitted hop nothing waits
        for any more is cancelled at the provider."""
        hop = item.hop
        if hop is None:
            return
        hop.items.pop(item.custom_id, None)
        if not hop.closed:
            hop.size -= len(hop.lines.pop(item.custom_id, b"")) + 1
            return
        unclaimed = any(h is hop for found in self._waiting.values() for h, _ in found)
        if hop.items or hop.finished or hop.batch_id is None or unclaimed:
            return
        with trio.CancelScope(shield=True):
            await self._cancel(hop, "nothing waits for it any more (its calls were cancelled)")

    async def _cancel(self, hop: _Hop, why: str) -> None:
        """Cancel ``hop``'s batch at the provider (bounded in time), and forget the hop."""
        hop.finished = True
        self._hops.pop(hop.number, None)
        self._forget_waiting(hop)
        assert hop.batch_id is not None
        sample = hop.sample or self._sample()
        done = False
        with trio.move_on_after(CANCEL_TIMEOUT):
            try:
                await self.api.cancel(self._channel(sample), hop.batch_id)
                done = True
            except (BatchRefused, TransportError) as exc:
                _log.warning("hop %d: could not cancel batch %s: %s", hop.number,
                             hop.batch_id, exc)  # fmt: skip
        if not done:
            return
        self.journal.cancelled(hop.tag)
        self.cancelled += 1
        hop.set_status("cancelled")
        note = f"cancelled at the provider: {why}"
        self._changed(hop, note)
        _log.warning("hop %d: batch %s %s", hop.number, hop.batch_id, note)

    def _forget_waiting(self, hop: _Hop) -> None:
        for key in [k for k, found in self._waiting.items() if any(h is hop for h, _ in found)]:
            self._waiting[key] = deque((h, c) for h, c in self._waiting[key] if h is not hop)
            if not self._waiting[key]:
                del self._waiting[key]

    # -- start and end ------------------------------------------------------------------------

    async def _start(self, sample: HttpRequest) -> None:
        """Once, before the first call: cancel the batches a replaced journal left in flight,
        and look for the batches of hops whose submission was never confirmed."""
        async with self._start_lock:
            if self._started:
                return
            channel = self._channel(sample)
            for orphan in self.journal.orphans:
                assert orphan.batch_id is not None
                try:
                    await self.api.cancel(channel, orphan.batch_id)
                except (BatchRefused, TransportError) as exc:
                    _log.warning("could not cancel batch %s of the replaced journal: %s",
                                 orphan.batch_id, exc)  # fmt: skip
                    continue
                self.cancelled += 1
                _log.warning("batch %s (hop %d of the replaced journal) cancelled at the "
                             "provider: a new run does not wait for it", orphan.batch_id,
                             orphan.number)  # fmt: skip
            self.journal.orphans = []
            for hop in self.journal.unconfirmed:
                try:
                    found = await self.api.find(channel, hop.tag)
                except (BatchRefused, TransportError) as exc:
                    _log.warning("could not look for hop %d's batch: %s", hop.number, exc)
                    continue
                if found is not None:
                    self.journal.submitted(hop.tag, found)
                    hop.batch_id = found
                    self._adopt(hop)
                    _log.warning("hop %d: found batch %s, accepted before the last run ended",
                                 hop.number, found)  # fmt: skip
            self.journal.unconfirmed = []
            self._started = True

    async def aclose(self) -> None:
        """Cancel every batch still in flight at the provider (nothing will wait for it), close
        the transport and the journal."""
        with trio.CancelScope(shield=True):
            if not self._started and self.journal.orphans:
                with trio.move_on_after(CANCEL_TIMEOUT):
                    await self._start(self._sample())
            for hop in list(self._hops.values()):
                if hop.batch_id is not None and not hop.finished:
                    await self._cancel(hop, "nothing waits for it any more (the run ended)")
        await self.transport.aclose()
        self.journal.close()

    # -- moving a hop on ----------------------------------------------------------------------

    async def _advance(self, hop: _Hop) -> None:
        """One step of ``hop`` (the caller holds its lock)."""
        if hop.batch_id is None:
            await self._gather_and_submit(hop)
            return
        await trio.sleep(hop.wait)
        hop.wait = min(max(hop.wait * 1.5, self.poll), self.poll_max)
        sample = hop.sample or next(iter(hop.items.values())).request
        hop.sample = sample
        channel = self._channel(sample)
        try:
            state = await self.api.poll(channel, hop.batch_id)
        except BatchRefused as exc:
            if exc.permanent:
                self._dead(hop, exc)
            else:
                _log.warning("hop %d: polling batch %s: %s", hop.number, hop.batch_id, exc)
            return
        except TransportError as exc:
            _log.warning("hop %d: polling batch %s failed: %s", hop.number, hop.batch_id, exc)
            return
        before = hop.state
        hop.state = state
        progressed = state.total and (
            state.done * 10 // state.total != before.done * 10 // max(state.total, 1)
        )
        if (hop.set_status(state.status) or progressed) and not state.ended:
            self._changed(hop)  # an end has its own line
        self._step(hop, "", polled=True)
        if not state.ended:
            return
        if state.status == "failed" and state.errors:
            self._failed(hop, state)
            return
        try:
            await self._download(hop, channel, state)
        except BatchRefused as exc:
            if exc.permanent:
                self._dead(hop, exc)
            else:
                _log.warning("hop %d: reading batch %s: %s", hop.number, hop.batch_id, exc)
        except TransportError as exc:
            _log.warning("hop %d: reading batch %s failed: %s", hop.number, hop.batch_id, exc)

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
        await self._room(hop)
        hop.set_status("submitting")
        ids = list(hop.lines)
        lines = [hop.lines[i] for i in ids]
        assert hop.sample is not None
        channel = self._channel(hop.sample)
        self.journal.intent(hop.tag, hop.number, ids)
        try:
            batch_id = await self.api.submit(channel, lines, hop.tag)
        except BatchRefused as exc:
            if exc.status == 413 and self._split(hop, f"HTTP 413: {exc}", alone=False):
                return
            self._refused(hop, exc)
            return
        except TransportError as exc:
            found = await self._find(channel, hop)
            if found is None:
                _log.warning("hop %d: submitting %d requests failed: %s", hop.number,
                             len(ids), exc)  # fmt: skip
                self._settle(hop, "refused", f"submission failed: {exc}")
                for item in hop.items.values():
                    item.failure = exc
                    item.done.set()
                return
            batch_id = found
        self._accepted(hop, batch_id)
        self.submitted += 1
        hop.wait = self.poll
        hop.submitted = time.time()
        hop.set_status("submitted")
        note = (f"submitted at {_clock(hop.submitted)} ({len(ids)} requests, "
                f"{_megabytes(hop.size)}); it ends by {_clock(hop.submitted + WINDOW)} "
                "tomorrow at the latest (the provider's 24 h window)")  # fmt: skip
        self._changed(hop, note)
        _log.info("hop %d: batch %s %s", hop.number, batch_id, note)

    @trio.lowlevel.enable_ki_protection
    def _accepted(self, hop: _Hop, batch_id: str) -> None:
        """Record that the provider accepted ``hop`` as ``batch_id``, in memory and in the
        journal together. A Ctrl-C that comes meanwhile is raised at the next checkpoint
        instead (trio's KI protection): most likely while the journal syncs, and raised there
        it would leave a batch the journal names that this process does not know to cancel."""
        hop.batch_id = batch_id
        self.journal.submitted(hop.tag, batch_id)

    async def _find(self, channel: Channel, hop: _Hop) -> str | None:
        """The batch a submission whose answer was lost created, if the provider can tell."""
        with trio.move_on_after(CANCEL_TIMEOUT):
            try:
                return await self.api.find(channel, hop.tag)
            except (BatchRefused, TransportError):
                return None
        return None

    async def _room(self, hop: _Hop) -> None:
        """Wait until ``hop`` may be submitted: a hop split for its size waits until no other
        is in flight, and with ``max_enqueued_tokens`` every hop waits for room beside the hops
        in flight."""
        limit = self.max_enqueued_tokens
        while True:
            flying = [h for h in self._hops.values()
                      if h is not hop and h.flying and not h.finished]  # fmt: skip
            queued = sum(h.tokens for h in flying)
            if not flying or (not hop.alone and (limit is None or queued + hop.tokens <= limit)):
                hop.solo = not flying
                hop.flying = True
                return
            hop.set_status("waiting for room")
            await self._ended.wait()

    def _hop_ended(self) -> None:
        self._ended.set()
        self._ended = trio.Event()

    def _settle(self, hop: _Hop, status: str, note: str) -> None:
        """``hop`` is over (its calls are answered or moved)."""
        hop.finished = True
        self._hops.pop(hop.number, None)
        hop.set_status(status)
        self._changed(hop, note)
        if hop.batch_id is not None:
            self._hop_ended()

    def _split(self, hop: _Hop, why: str, *, alone: bool) -> bool:
        """Move ``hop``'s lines into two new hops (``alone``: each submitted when no other hop
        is in flight); ``False`` when it holds a single line that was submitted alone (or need
        not be), so that no smaller batch can pass."""
        ids = [c for c in hop.lines if c in hop.items]  # a line whose call left is dropped
        if len(ids) < 2 and (not alone or hop.solo):
            return False
        parts = [ids[: len(ids) // 2], ids[len(ids) // 2 :]] if len(ids) > 1 else [ids]
        numbers = []
        for part in parts:
            if not part:
                continue
            new = self._new_hop()
            new.closed = True
            new.sample = hop.sample
            new.alone = alone
            for custom_id in part:
                item = hop.items[custom_id]
                # From the call's request: a resumed hop does not hold its lines' bytes.
                line = hop.lines[custom_id] or self.api.line(custom_id, item.request)
                new.lines[custom_id] = line
                new.size += len(line) + 1
                new.tokens += _tokens(line)
                item.hop = new
                new.items[custom_id] = item
            numbers.append(str(new.number))
        hop.items.clear()
        into = " and ".join(numbers) or "nothing (no call waits for its lines)"
        verb = "split into hops" if len(numbers) > 1 else "sent again alone as hop"
        self._settle(hop, "split", f"{why}: {verb} {into}")
        _log.warning("hop %d: %s: %s %s", hop.number, why, verb, into)
        return True

    def _refused(self, hop: _Hop, exc: BatchRefused) -> None:
        """The provider refused to take ``hop``: each call gets its answer."""
        _log.warning("hop %d: submitting %d requests was refused: %s", hop.number,
                     len(hop.lines), exc)  # fmt: skip
        self._settle(hop, "refused", f"refused: {exc}")
        for item in hop.items.values():
            item.answer = exc.status, exc.body
            item.headers = exc.headers
            item.done.set()

    def _dead(self, hop: _Hop, exc: BatchRefused) -> None:
        """The provider refused ``hop``'s batch for good: its calls fail with its refusal."""
        assert hop.batch_id is not None
        self.journal.dead(hop.tag, exc.status, str(exc))
        hop.death = exc.status, exc.body
        _log.warning("hop %d: batch %s refused for good (%s); its calls fail", hop.number,
                     hop.batch_id, exc)  # fmt: skip
        self._settle(hop, "dead", f"refused for good: {exc}")
        for item in hop.items.values():
            item.answer = hop.death
            item.headers = exc.headers
            item.done.set()

    def _failed(self, hop: _Hop, state: BatchState) -> None:
        """An OpenAI batch ``failed`` as a whole (``errors.data`` says why)."""
        assert hop.batch_id is not None
        why = "; ".join(f"{e.code}: {e.message}" for e in state.errors)
        self.journal.ended(hop.tag, 0, state.status)
        if all(e.about_size for e in state.errors) and self._split(
            hop, f"failed for its size ({why})", alone=True
        ):
            return
        answers = split_failed(state, hop.lines)
        if all(e.about_size for e in state.errors):  # one line, too big on its own
            message = f"batch {hop.batch_id} failed: {why}"
            error = {"message": message, "type": "invalid_request_error", "code": "batch_too_large"}
            body = {"error": error}
            answers = dict.fromkeys(hop.lines, (413, orjson.dumps(body)))
        self._settle(hop, "failed", f"failed: {why}")
        for custom_id, item in hop.items.items():
            item.answer = answers[custom_id]
            item.done.set()

    async def _download(self, hop: _Hop, channel: Channel, state: BatchState) -> None:
        """Stream ``hop``'s results into the journal, then answer its calls."""
        assert hop.batch_id is not None
        hop.downloads += 1
        attempt = hop.downloads
        found: dict[str, AnswerRef] = {}
        journal = self.journal

        def take(custom_id: str, status: int, body: bytes) -> None:
            if custom_id in hop.lines and custom_id not in found:
                found[custom_id] = journal.answer(hop.tag, attempt, custom_id, status, body)

        await self.api.download(channel, state, take)
        for custom_id in hop.lines:
            if custom_id not in found:
                status, body = unanswered(f"batch {hop.batch_id} {state.status}: the line has "
                                          "no result")  # fmt: skip
                found[custom_id] = journal.answer(hop.tag, attempt, custom_id, status, body)
        journal.ended(hop.tag, attempt, state.status)
        now = time.time()
        took = "" if hop.submitted is None else f" after {_duration(now - hop.submitted)}"
        failed = f", {state.failed} failed" if state.failed else ""
        note = f"{state.status} at {_clock(now)}{took} ({state.done} answered{failed})"
        self._settle(hop, state.status, note)
        for custom_id, ref in found.items():
            item = hop.items.get(custom_id)
            if item is not None:
                item.ref = ref
                item.done.set()
            else:
                journal.keep_answer(custom_id, ref)
        self._forget_waiting(hop)
        if self.clean_up:
            try:
                await self.api.clean_up(channel, state)
            except (BatchRefused, TransportError) as exc:
                _log.warning("hop %d: cleaning up batch %s: %s", hop.number, hop.batch_id, exc)
