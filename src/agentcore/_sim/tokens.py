"""An approximate tokenizer: deterministic, fast, and close enough to BPE for accounting.

Text is cut into pieces: a word is split into runs of at most four letters or digits (the
first run takes one preceding space with it, as byte-level BPE vocabularies do), every
punctuation character is a piece of its own (with an optional preceding space), and a run of
other whitespace is one piece. English prose comes out at roughly one piece per 3.5 to 4
characters, which is what real tokenizers give.

The cut is local: only a single space joins the piece after it, so for a text ending in a
newline and a continuation starting with a non-space character, the pieces of the two joined
are the pieces of each, concatenated. The prefix cache relies on that to extend a prompt's
blocks with the reply's (prompts end with a newline; replies never start with a space).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["TokenMemo", "count_tokens", "split_tokens"]

_PIECE = re.compile(r" ?[^\W_]{1,4}| ?[^\s\w]| ?_|\s+")


def split_tokens(text: str) -> list[str]:
    """The pieces of ``text``; joined, they give ``text`` back."""
    return _PIECE.findall(text)


def count_tokens(text: str) -> int:
    """The number of pieces in ``text``."""
    return len(_PIECE.findall(text))


class TokenMemo:
    """Tokenizes texts made of parts, remembering the pieces of parts seen before.

    Prompts are rendered as parts that start with ``<`` and end with a newline (one per
    message, see ``_template``), so by the locality above the pieces of a prompt are the
    pieces of its parts, concatenated. The parts many requests share (the system prompt with
    the tool list) are then cut once. The memo holds at most ``capacity`` parts and starts
    afresh when full.
    """

    __slots__ = ("_capacity", "_memo")

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._memo: dict[str, list[str]] = {}

    def split(self, parts: Iterable[str]) -> list[str]:
        """The pieces of the concatenated ``parts``."""
        memo = self._memo
        tokens: list[str] = []
        for part in parts:
            pieces = memo.get(part)
            if pieces is None:
                pieces = _PIECE.findall(part)
                if len(memo) >= self._capacity:
                    memo.clear()
                memo[part] = pieces
            tokens += pieces
        return tokens
