"""A block prefix cache, as vLLM's automatic prefix caching keeps it.

Theory of operation
-------------------
A token sequence is cut into blocks of ``block_size`` tokens; a trailing partial block is
never cached. Each full block is named by a chained hash: the hash of the previous block's
name and the block's own tokens (the first block also takes the request's cache salt). A name
therefore stands for the whole prefix up to the end of its block, and two sequences share a
block name exactly when they share everything up to it.

A lookup walks a request's names from the first and stops at the first one missing: the hit is
the longest cached prefix. The engine looks up when a request starts its prefill, inserts the
prompt's names when the prefill ends (so requests admitted later hit it, while requests
prefilling at the same moment do not, as on a real server) and the names of prompt plus reply
when the reply is finished (so the conversation's next turn hits the whole previous turn).

Capacity is counted in blocks. When an insertion overflows it, the least recently used blocks
go first. A lookup or insertion touches a request's blocks from the last to the first, so
within one sequence the earlier blocks are the more recent: eviction eats prefixes from their
tails, and the shared head of many conversations (system prompt, tools) stays longest.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import attrs

__all__ = ["PrefixCache", "PrefixCacheStatistics", "block_hashes"]


def block_hashes(
    tokens: Sequence[str], block_size: int, salt: str = "", known: Sequence[bytes] = ()
) -> list[bytes]:
    """The chained names of the full blocks of ``tokens``.

    Args:
        tokens: the token sequence.
        block_size: tokens per block.
        salt: mixed into the first block (vLLM's ``cache_salt``: isolates tenants).
        known: names already computed for a prefix of ``tokens`` (same salt); they are kept and
            the chain continues after them.

    Returns:
        One name per full block, in order.
    """
    names = list(known)
    previous = names[-1] if names else salt.encode()
    for start in range(len(names) * block_size, len(tokens) - block_size + 1, block_size):
        block = "\x1f".join(tokens[start : start + block_size]).encode()
        previous = hashlib.blake2b(previous + b"\x1e" + block, digest_size=16).digest()
        names.append(previous)
    return names


@attrs.frozen
class PrefixCacheStatistics:
    """Counters of a :class:`PrefixCache`."""

    blocks: int
    """Blocks held now."""
    capacity: int
    lookups: int
    """Lookups made."""
    hit_blocks: int
    """Blocks found, over all lookups."""
    evictions: int
    """Blocks evicted to make room."""


class PrefixCache:
    """Block names held in least-recently-used order."""

    __slots__ = ("_blocks", "_evictions", "_hit_blocks", "_lookups", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self._lookups = 0
        self._hit_blocks = 0
        self._evictions = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, name: bytes) -> bool:
        return name in self._blocks

    def match(self, names: Sequence[bytes]) -> int:
        """The number of leading ``names`` held; those blocks become the most recent."""
        blocks = self._blocks
        hit = 0
        for name in names:
            if name not in blocks:
                break
            hit += 1
        for name in reversed(names[:hit]):
            blocks.move_to_end(name)
        self._lookups += 1
        self._hit_blocks += hit
        return hit

    def insert(self, names: Sequence[bytes]) -> None:
        """Hold ``names`` as the most recent blocks, evicting the least recent beyond capacity."""
        if not self.capacity:
            return
        blocks = self._blocks
        for name in reversed(names):
            if name in blocks:
                blocks.move_to_end(name)
            else:
                blocks[name] = None
        overflow = len(blocks) - self.capacity
        for _ in range(max(overflow, 0)):
            blocks.popitem(last=False)
        self._evictions += max(overflow, 0)

    def clear(self) -> None:
        """Drop every block (counters are kept)."""
        self._blocks.clear()

    def statistics(self) -> PrefixCacheStatistics:
        """A snapshot of the counters."""
        return PrefixCacheStatistics(
            blocks=len(self._blocks),
            capacity=self.capacity,
            lookups=self._lookups,
            hit_blocks=self._hit_blocks,
            evictions=self._evictions,
        )
