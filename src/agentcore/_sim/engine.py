"""The simulated inference engine: batch slots, prefill and decode time, the prefix cache.

Theory of operation
-------------------
The engine runs at most ``slots`` sequences at once. A request first takes a slot: at once if
one is free and nobody waits, otherwise it queues, in arrival order (``scheduling="fifo"``) or
by priority, lower first, then arrival (``scheduling="priority"``). A released slot passes
straight to the first live waiter; a waiter cancelled before its turn is skipped, and one
cancelled just after being handed a slot hands it on.

Holding a slot, a request prefills: it looks its prompt's blocks up in the prefix cache (the
hit is capped so that at least one prompt token is computed, as vLLM always recomputes the
last one), sleeps for the uncached tokens and inserts the prompt's blocks. It then decodes,
sleeping per output token, in as many steps as the caller streams; when done it inserts the
blocks of prompt plus reply and gives the slot back.

Every duration is trio time (so ``MockClock`` makes a test instant), scaled by
``SimConfig.speedup``. Sequences do not slow each other down: a slot is a fixed-speed lane.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import attrs
import trio

from .config import SimConfig
from .prefix_cache import PrefixCache, block_hashes

__all__ = ["Engine", "EngineCounters"]


@attrs.define
class EngineCounters:
    """Running totals of the engine (mutable; the server snapshots them)."""

    admitted: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    prefill_tokens: int = 0
    completion_tokens: int = 0
    running: int = 0
    waiting: int = 0
    max_running: int = 0
    max_waiting: int = 0


@attrs.define(eq=False)
class _Waiter:
    event: trio.Event = attrs.field(factory=trio.Event)
    granted: bool = False
    abandoned: bool = False


class _Slot:
    """``async with engine.slot(priority):`` holds one engine slot."""

    __slots__ = ("_engine", "_priority")

    def __init__(self, engine: Engine, priority: int) -> None:
        self._engine = engine
        self._priority = priority

    async def __aenter__(self) -> None:
        await self._engine._acquire(self._priority)

    async def __aexit__(self, *exc_info: object) -> None:
        self._engine._release()


class Engine:
    """Slots, timing and the prefix cache of one simulated server."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.cache = PrefixCache(config.cache_blocks)
        self.counters = EngineCounters()
        self._free = config.slots
        self._queue: list[tuple[int, int, _Waiter]] = []
        self._arrivals = itertools.count()

    def slot(self, priority: int = 0) -> _Slot:
        """A context manager holding one slot (``priority`` counts under ``"priority"``)."""
        return _Slot(self, priority if self.config.scheduling == "priority" else 0)

    async def _acquire(self, priority: int) -> None:
        counters = self.counters
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._free and not counters.waiting:
            self._free -= 1
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            waiter = _Waiter()
            heapq.heappush(self._queue, (priority, next(self._arrivals), waiter))
            counters.waiting += 1
            counters.max_waiting = max(counters.max_waiting, counters.waiting)
            try:
                await waiter.event.wait()
            except BaseException:
                if waiter.granted:
                    self._pass_on()
                else:
                    waiter.abandoned = True
                    counters.waiting -= 1
                raise
        counters.admitted += 1
        counters.running += 1
        counters.max_running = max(counters.max_running, counters.running)

    def _release(self) -> None:
        self.counters.running -= 1
        self._pass_on()

    def _pass_on(self) -> None:
        while self._queue:
            waiter = heapq.heappop(self._queue)[2]
            if not waiter.abandoned:
                waiter.granted = True
                self.counters.waiting -= 1
                waiter.event.set()
                return
        self._free += 1

    async def prefill(self, tokens: Sequence[str], names: Sequence[bytes]) -> int:
        """Prefill a prompt (holding a slot): return its cached tokens.

        Args:
            tokens: the prompt's tokens.
            names: :func:`block_hashes` of ``tokens``.
        """
        block_size = self.config.block_size
        hit = min(self.cache.match(names), (len(tokens) - 1) // block_size)
        cached = hit * block_size
        computed = len(tokens) - cached
        counters = self.counters
        counters.prompt_tokens += len(tokens)
        counters.cached_tokens += cached
        counters.prefill_tokens += computed
        await trio.sleep(self.config.prefill_seconds(computed))
        self.cache.insert(names)
        return cached

    async def decode(self, tokens: int) -> None:
        """Decode ``tokens`` output tokens (holding a slot)."""
        self.counters.completion_tokens += tokens
        await trio.sleep(self.config.decode_seconds(tokens))

    def finish(
        self, tokens: Sequence[str], names: Sequence[bytes], reply: Sequence[str], salt: str
    ) -> None:
        """Cache the blocks of prompt plus reply, once the reply is decoded.

        Args:
            tokens: the prompt's tokens.
            names: their block names.
            reply: the tokens of the reply as the next prompt will show it.
            salt: the request's cache salt.
        """
        if self.cache.capacity:
            full = block_hashes([*tokens, *reply], self.config.block_size, salt, known=names)
            self.cache.insert(full)
