"""Plain-text answers: short sentences built from the words of the prompt.

The simulated model has no language model behind it, yet its free-text answers are the first
thing a newcomer reads, so they should read as sentences rather than a list of words. An
answer is made of sentence frames (``"{A} is the key point."``) whose slots take the content
words of the conversation's last user message (and of the tool results that followed it):
words that are not common function words, numbers included, so "What is 2 + 3?" gives
``2`` and ``3``.

The answer has exactly the number of tokens asked for (by the approximate tokenizer), which
the latency model and token accounting rely on: frames are added while they fit, leaving
either nothing or at least two tokens, and the rest is closed with short stock sentences
whose lengths add up to what is left. Every sentence starts with a capital (or a digit) and
ends with a period. Every choice comes from the caller's random generator, so answers are
deterministic; the work is a few regular-expression passes over short strings.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from functools import cache

from .tokens import count_tokens, split_tokens

__all__ = ["answer_text", "content_words"]

_TOKEN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_\-]|\.(?=[A-Za-z0-9]))*")

_STOPWORDS = frozenset(
    """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing done each few for from give had has
    have having he her here hers him his how i if in into is it its itself just let me more
    most my no nor not now of off on once only or other our ours out over own please same say
    she should so some such tell than thank thanks that the their theirs them then there these
    they this those through to too under until up us very was we were what when where which
    while who whom why will with would write you your yours across along among around either
    every many much neither onto per since upon via whether within without yet
    """.split()  # noqa: SIM905 (a word list reads better as text)
)

_MAX_WORDS = 12
_MAX_WORD_CHARS = 24

_FRAMES_ONE = (
    "This answer is about {a}.",
    "{A} is the key point.",
    "Looking at {a}, the details fit together.",
    "The evidence on {a} is consistent.",
    "It is worth checking {a} once more.",
    "The notes on {a} support this.",
    "Everything here follows from {a}.",
    "A closer look at {a} confirms it.",
)
_FRAMES_TWO = (
    "{A} and {b} point the same way.",
    "In short, {a} comes first and {b} follows.",
    "Taken together, {a} and {b} settle the question.",
    "Nothing about {b} changes what {a} shows.",
    "{A} matters more than {b} here.",
    "The link between {a} and {b} is clear.",
)
_CLOSERS = (
    "Done.",
    "All set.",
    "That is all.",
    "That covers it.",
    "Hope this helps.",
    "In short, yes.",
    "Nothing else stands out.",
)
_GENERIC = ("the question", "the request", "the details")
"""Slot fillers for a prompt without content words."""


def content_words(*texts: str) -> list[str]:
    """The content words of ``texts``, in order of first appearance, at most twelve.

    Words are runs of letters and digits (with inner ``_``, ``-`` and dots, so ``a.py``
    stays whole), common function words left out. A word written with a capital first
    letter only is lowered (it is most likely capitalised for starting a sentence).
    """
    seen: dict[str, str] = {}
    for text in texts:
        for word in _TOKEN.findall(text[:4000]):
            key = word.lower()
            if key in _STOPWORDS or key in seen or len(word) > _MAX_WORD_CHARS:
                continue
            if len(word) == 1 and not word.isdigit():
                continue
            seen[key] = key if word[:1].isupper() and word[1:].islower() else word
            if len(seen) >= _MAX_WORDS:
                return list(seen.values())
    return list(seen.values())


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fill(frame: str, a: str, b: str) -> str:
    return _capital(frame.format(a=a, b=b, A=_capital(a)))


@cache
def _closer_lengths() -> dict[int, tuple[str, ...]]:
    by_length: dict[int, list[str]] = {}
    for closer in _CLOSERS:
        by_length.setdefault(count_tokens(closer), []).append(closer)
    return {n: tuple(texts) for n, texts in by_length.items()}


def _closing(rng: random.Random, tokens: int) -> list[str]:
    """Stock sentences of ``tokens`` tokens in all (``tokens`` at least 2)."""
    lengths = _closer_lengths()
    sentences: list[str] = []
    used: set[str] = set()
    left = tokens
    while left:
        fits = [n for n in lengths if n == left or n <= left - 2]
        n = rng.choice(fits) if left > max(lengths) else max(fits)
        choices = [c for c in lengths[n] if c not in used] or list(lengths[n])
        closer = rng.choice(choices)
        used.add(closer)
        sentences.append(closer)
        left -= n
    return sentences


def answer_text(rng: random.Random, words: Sequence[str], tokens: int) -> str:
    """A plain-text answer of exactly ``tokens`` tokens made of sentences about ``words``.

    Args:
        rng: the generator every choice comes from.
        words: content words to talk about (:func:`content_words`); may be empty.
        tokens: the answer's length in tokens.

    Returns:
        Sentences joined by single spaces; for fewer than two tokens, the start of one.
    """
    pool = list(words) or list(_GENERIC)
    sentences: list[str] = []
    recent: list[str] = []
    left = tokens
    while left >= 2:
        a = rng.choice(pool)
        others = [w for w in pool if w != a]
        frames = _FRAMES_TWO + _FRAMES_ONE if others else _FRAMES_ONE
        order = rng.sample(range(len(frames)), len(frames))
        chosen = None
        for i in order:
            if frames[i] in recent:
                continue
            b = rng.choice(others) if others else a
            sentence = _fill(frames[i], a, b)
            n = count_tokens(sentence)
            if n == left or n <= left - 2:
                chosen, frame = sentence, frames[i]
                break
        if chosen is None:
            sentences += _closing(rng, left)
            break
        sentences.append(chosen)
        recent = [*recent[-3:], frame]
        left -= count_tokens(chosen)
    text = " ".join(sentences)
    if tokens < 2:
        text = "".join(split_tokens(_fill(_FRAMES_ONE[0], pool[0], pool[0]))[:tokens])
    return text
