"""Padding a batch's shared prefix to the engine's prefix-cache blocks.

Theory of operation
-------------------
A prefix cache that keeps whole blocks of ``B`` tokens (vLLM's paged KV cache) reuses the
prefix a batch's requests share only up to its last block boundary: the tokens between that
boundary and the end of the shared prefix are computed again by every request, up to ``B - 1``
of them (127 on vLLM's CPU backend). Whitespace appended to the system prompt moves the end of
the shared prefix onto a boundary; then every request computes only its own tokens.

The end of the shared prefix is measured, not guessed, with the engine's own tokenizer and
chat template (:mod:`agentcore._codecs.prefix_blocks`):

1. The engine's block size: with ``align_prefix="auto"`` nothing is padded below
   :data:`AUTO_MIN_BLOCK` tokens (the saving is at most a block per request).
2. The *probe* requests are tokenized, all at once: the first request of each sampled input,
   and, where the batch sends a warm request carrying the prefix, that request (the task's
   prefix and the opening the sampled inputs share, :func:`~agentcore._tasks.task.prefix_call`),
   so that it covers the boundary. The inputs are sampled across a sequence (first, last and
   between: inputs numbered in order share a longer opening at the start than over the whole
   list); an iterator shows only its first inputs, so the template's literal head alone stands
   in for "every input" (a probe of its own). The tokens every probe shares are the shared
   prefix.
3. If that length is not a multiple of ``B``, whitespace (:data:`PAD_UNITS`, in order) is
   appended to the system prompt and the first probe is tokenized again: the padding sits
   before the point where the probes part, so it moves that point by the tokens it added to
   the probe, provided the probe's tokens from that point on are the ones it had (checked;
   otherwise the two probes that shared least are tokenized again and compared). A tokenizer
   may merge whitespace or a chat template drop it, so the count of units is corrected from
   the tokens each try added, :data:`MAX_TRIES` times per unit, until the shared prefix ends
   on a boundary. Nothing found: the task is left as it was.

The batch then runs the padded task (its warm-up included). Every request made here is counted
in :class:`PrefixAlignment` (none is a model request). Nothing here fails a batch: an engine
that does not answer, or answers something unusable, leaves the prefix unpadded and the
report says why.

A batch with a step journal records what it decided (:func:`alignment_record`), and a batch
resumed from that journal pads as recorded instead of measuring again
(:func:`journaled_alignment`): its restored agents go on with the system prompt their
journaled steps followed, byte for byte, although the inputs still to run, sampled on their
own, may share a longer prefix than the whole batch did.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio

from .._codecs.codec import AlignPrefix
from .._codecs.http import Timeouts
from .._codecs.openai import OpenAICodec
from .._codecs.prefix_blocks import (
    BlockSize,
    block_size_request,
    read_block_size,
    read_tokens,
    tokenize_request,
)
from .._core.errors import AgentcoreError
from .._core.events import CallModel
from .._transports.model_client import HttpModelClient
from .task import RenderError, Task, compile_job, prefix_call

if TYPE_CHECKING:
    from .._driver.driver import Driver

__all__ = [
    "AUTO_MIN_BLOCK",
    "MAX_TRIES",
    "PAD_UNITS",
    "SAMPLES",
    "PrefixAlignment",
    "Tokenize",
    "align_prefix",
    "alignment_record",
    "journaled_alignment",
    "pad_to_blocks",
    "probe_calls",
    "sample_inputs",
]

AUTO_MIN_BLOCK = 64
"""The smallest block (tokens) that ``align_prefix="auto"`` pads for."""
PAD_UNITS = ("\n", " \n", " ")
"""The whitespace tried as padding, in order."""
MAX_TRIES = 4
"""Tokenizations of padded probes per unit of :data:`PAD_UNITS` before the next is tried."""
SAMPLES = 4
"""Inputs sampled to measure the shared prefix."""
"""Tokenizations of padded probes per unit of :data:`PAD_UNITS` before the next is tried."""
_TIMEOUTS = Timeouts(connect=10.0, read=30.0, total=60.0)

Tokenize = Callable[[CallModel], Awaitable["list[int] | None"]]
"""The engine's prompt tokens of a request (``None``: it gave none)."""


@attrs.frozen
class PrefixAlignment:
    """What a batch did to end its shared prefix on a block boundary of the engine's prefix
    cache (``BatchStream.warm_up.alignment``)."""

    block_size: int | None = None
    """Tokens per block of the engine's prefix cache (``None``: not known)."""
    shared_tokens: int = 0
    """Tokens the probe requests shared before padding (0: not measured)."""
    padding: str = ""
    """The whitespace appended to the system prompt ("": none)."""
    boundary: int | None = None
    """Where the shared prefix ends once padded: a multiple of ``block_size`` (``None``: it
    does not end on one)."""
    requests: int = 0
    """Requests made to the engine (block size and tokenizations; none is a model request)."""
    seconds: float = 0.0
    """How long it took (before the fan-out)."""
    detail: str = ""
    """Why the prefix does not end on a boundary, if it does not."""
    journaled: bool = False
    """Taken from the step journal the batch resumed from: the padding of its first run,
    nothing measured again."""

    @property
    def padding_tokens(self) -> int:
        """Tokens the padding added to the shared prefix."""
        if self.boundary is None:
            return 0
        return self.boundary - self.shared_tokens

    @property
    def aligned(self) -> bool:
        """Whether the shared prefix ends on a block boundary."""
        return self.boundary is not None


def sample_inputs(inputs: Iterable[Any]) -> tuple[list[Any], Iterable[Any], bool]:
    """Up to :data:`SAMPLES` inputs to measure the shared prefix with, the inputs to run
    (``inputs`` itself, or the peeked head of an iterator chained back in front of its rest),
    and whether the samples stand for every input (taken across a sequence: first, last and
    between; an iterator shows only its head)."""
    if isinstance(inputs, Sequence) and not isinstance(inputs, str | bytes):
        count = len(inputs)
        picks = sorted({0, count // 3, 2 * count // 3, count - 1}) if count else []
        return [inputs[i] for i in picks], inputs, True
    iterator = iter(inputs)
    head = list(itertools.islice(iterator, SAMPLES))
    return head, itertools.chain(head, iterator), False


def probe_calls(
    task: Task[Any, Any],
    samples: Sequence[Any],
    *,
    opening: str | None,
    every_input: bool,
    schema_on_final: bool,
    warm: bool,
) -> list[CallModel]:
    """The requests whose shared tokens are the batch's shared prefix: the warm-up request
    (``opening``) when the batch sends one that carries the prefix (``warm``), the first
    request of each sample that renders, then, unless the samples stand for ``every_input``,
    the warm-up request with the template's literal head alone (what every input shares)."""
    calls = []
    if warm:
        calls.append(
            prefix_call(task, run_id="align", schema_on_final=schema_on_final, opening=opening)
        )
    for index, value in enumerate(samples):
        try:
            loop = compile_job(
                task, value, run_id=f"align-{index}", schema_on_final=schema_on_final
            )
        except RenderError:
            continue
        first = loop.start()[0]
        assert isinstance(first, CallModel)
        calls.append(first)
    if not every_input:
        calls.append(prefix_call(task, run_id="align", schema_on_final=schema_on_final))
    return calls


def _moved(before: Sequence[int], after: Sequence[int], shared: int) -> int | None:
    """Where the shared prefix ends once padded, from one probe's tokens ``before`` and
    ``after`` the padding, its first ``shared`` tokens shared with every probe: ``shared``
    plus the tokens the padding added, if the tokens from ``shared`` on are the ones the
    probe had (``None``: the padding changed more than the shared part)."""
    added = len(after) - len(before)
    if added <= 0:
        return shared + added  # the padding added nothing (or merged with what was there)
    if after[shared + added :] != before[shared:]:
        return None
    return shared + added


def _shared(first: Sequence[int], other: Sequence[int]) -> int:
    """How many leading tokens two token lists share."""
    n = min(len(first), len(other))
    for i in range(n):
        if first[i] != other[i]:
            return i
    return n


class _Counted:
    """A tokenizer that counts its requests and gives up on the first failure."""

    def __init__(self, tokenize: Tokenize) -> None:
        self._tokenize = tokenize
        self.requests = 0

    async def all(self, calls: Sequence[CallModel]) -> list[list[int]] | None:
        results: list[list[int] | None] = [None] * len(calls)

        async def one(index: int) -> None:
            self.requests += 1
            results[index] = await self._tokenize(calls[index])

        async with trio.open_nursery() as nursery:
            for index in range(len(calls)):
                nursery.start_soon(one, index)
        if any(tokens is None for tokens in results):
            return None
        return [tokens for tokens in results if tokens is not None]


async def pad_to_blocks(
    task: Task[Any, Any],
    probes: Callable[[Task[Any, Any]], list[CallModel]],
    tokenize: Tokenize,
    block: int,
    *,
    measured: list[list[int]] | None = None,
) -> tuple[Task[Any, Any], PrefixAlignment]:
    """``task`` with its system prompt padded so that the tokens the ``probes`` of the padded
    task share end on a multiple of ``block`` (see the module docstring), and the report
    (its ``requests`` are the tokenizations made here; ``seconds`` is left to the caller).
    ``measured``: the tokens of ``probes(task)``, when they are already known."""
    counted = _Counted(tokenize)
    report = PrefixAlignment(block_size=block)
    if not task.system:
        return task, attrs.evolve(report, detail="the task has no system prompt to pad")
    calls = probes(task)
    if len(calls) < 2:
        return task, attrs.evolve(report, detail="no input fits the template")
    tokens = measured if measured is not None else await counted.all(calls)
    if tokens is None:
        return task, attrs.evolve(report, requests=counted.requests, detail=_NO_TOKENS)
    lengths = [_shared(tokens[0], other) for other in tokens[1:]]
    shared = min(lengths)
    least = 1 + lengths.index(shared)  # the probe that shares least with the first
    report = attrs.evolve(report, shared_tokens=shared)
    if shared % block == 0:
        return task, attrs.evolve(report, boundary=shared, requests=counted.requests)
    for unit in PAD_UNITS:
        count = -shared % block
        for _ in range(MAX_TRIES):
            padded = attrs.evolve(task, system=task.system + unit * count)
            again = probes(padded)
            first = await counted.all([again[0]])
            now = None if first is None else _moved(tokens[0], first[0], shared)
            if first is not None and now is None:  # the padding changed more: compare two
                pair = await counted.all([again[0], again[least]])
                now = None if pair is None else _shared(pair[0], pair[1])
            if now is None:
                return task, attrs.evolve(report, requests=counted.requests, detail=_NO_TOKENS)
            added = now - shared
            if added <= 0:
                break  # the template drops this whitespace, or the tokens merged away
            if now % block == 0:
                done = attrs.evolve(report, padding=unit * count, boundary=now)
                return padded, attrs.evolve(done, requests=counted.requests)
            # Units per token so far, applied to the tokens still missing.
            count += max(1, math.ceil((-now % block) * count / added))
    detail = f"no whitespace padding put the shared prefix on a {block}-token boundary"
    return task, attrs.evolve(report, requests=counted.requests, detail=detail)


_NO_TOKENS = "the engine did not tokenize the probe requests"


async def align_prefix(
    driver: Driver,
    task: Task[Any, Any],
    samples: Sequence[Any],
    *,
    opening: str | None,
    every_input: bool,
    warm: bool,
) -> tuple[Task[Any, Any], PrefixAlignment | None]:
    """Pad ``task``'s shared prefix to the block size of the driver's engine, as its backend's
    ``align_prefix`` says (``None``: nothing was tried); ``warm``: the batch sends a warm
    request carrying the prefix, which the boundary must fall within."""
    backend = driver.backend
    mode = False if backend is None else backend.align_prefix
    client = driver.client
    if mode is False or len(samples) < 2 or not isinstance(client, HttpModelClient):
        return task, None  # one input shares its prefix with nothing
    codec = client.codec
    if not isinstance(codec, OpenAICodec) or codec.options.record.prefix_blocks is None:
        return task, None
    started = trio.current_time()
    transport = client.transport
    base_url = codec.base_url

    async def tokenize(call: CallModel) -> list[int] | None:
        try:
            reply = await transport.send(tokenize_request(base_url, codec.encode(call)), _TIMEOUTS)
        except AgentcoreError:
            return None
        return read_tokens(reply.body) if reply.status == 200 else None

    def probes(candidate: Task[Any, Any]) -> list[CallModel]:
        return probe_calls(
            candidate,
            samples,
            opening=opening,
            every_input=every_input,
            schema_on_final=driver.schema_on_final,
            warm=warm,
        )

    # The block size and the probes' tokens are asked for at once (one round trip); the
    # block size is kept for the client's later batches.
    counted = _Counted(tokenize)
    known = _BLOCKS.get(client)
    sizes: list[BlockSize] = [] if known is None else [known]
    measured: list[list[list[int]] | None] = []

    async def read_size() -> None:
        try:
            reply = await transport.send(block_size_request(base_url), _TIMEOUTS)
        except AgentcoreError as exc:
            sizes.append(BlockSize(None, f"/metrics did not answer: {exc}"))
            return
        if reply.status != 200:
            sizes.append(BlockSize(None, f"/metrics answered {reply.status}"))
            return
        size = read_block_size(reply.body.decode("utf-8", "replace"))
        if size.tokens is not None:
            _BLOCKS[client] = size
        sizes.append(size)

    async def measure() -> None:
        measured.append(await counted.all(probes(task)))

    wanted = known is None or (known.tokens is not None and _pads(mode, known.tokens))
    async with trio.open_nursery() as nursery:
        if known is None:
            nursery.start_soon(read_size)
        if wanted and task.system:
            nursery.start_soon(measure)
    size = sizes[0]
    report = PrefixAlignment(block_size=size.tokens, requests=int(known is None))
    if size.tokens is None:
        report = attrs.evolve(report, detail=size.problem)
    elif not _pads(mode, size.tokens):
        report = attrs.evolve(
            report,
            detail=f"blocks of {size.tokens} tokens (align_prefix='auto' pads from "
            f"{AUTO_MIN_BLOCK})",
        )
    else:
        first = measured[0] if measured else None
        if measured and first is None:
            report = attrs.evolve(report, detail=_NO_TOKENS)
        else:
            task, found = await pad_to_blocks(task, probes, tokenize, size.tokens, measured=first)
            report = attrs.evolve(found, requests=found.requests + report.requests)
    report = attrs.evolve(report, requests=report.requests + counted.requests)
    return task, attrs.evolve(report, seconds=trio.current_time() - started)


def alignment_record(alignment: PrefixAlignment | None) -> str:
    """What a step journal keeps of a batch's alignment (``None``: not tried)."""
    if alignment is None:
        return "null"
    kept = {
        "block_size": alignment.block_size,
        "shared_tokens": alignment.shared_tokens,
        "padding": alignment.padding,
        "boundary": alignment.boundary,
        "detail": alignment.detail,
    }
    return orjson.dumps(kept).decode()


def journaled_alignment(
    task: Task[Any, Any], record: str
) -> tuple[Task[Any, Any], PrefixAlignment | None]:
    """``task`` padded as the batch's :func:`alignment_record` says, and its report.

    Raises:
        ValueError: ``record`` is not one.
    """
    try:
        kept = orjson.loads(record)
        if kept is None:
            return task, None
        found = PrefixAlignment(**kept, journaled=True)  # TypeError: not its fields
        if not isinstance(found.padding, str) or found.padding.strip():
            raise TypeError("the padding is not whitespace")
    except (orjson.JSONDecodeError, TypeError):
        raise ValueError(f"not a prefix alignment: {record[:200]!r}") from None
    if found.padding and task.system:
        task = attrs.evolve(task, system=task.system + found.padding)
    return task, found


def _pads(mode: AlignPrefix, block: int) -> bool:
    """Whether ``mode`` pads for blocks of ``block`` tokens."""
    return mode is True or block >= AUTO_MIN_BLOCK


_BLOCKS: weakref.WeakKeyDictionary[HttpModelClient, BlockSize] = weakref.WeakKeyDictionary()
"""The block size each client's engine reported, read once per client."""
