"""What a request will cost in tokens before it is sent, learned from what servers count.

Theory of operation
-------------------
A server counts a prompt with its own tokenizer over its own rendering of the request: the
text of the messages, a few tokens of framing around each message, tool call and tool (role
markers, JSON keys, the template's wrappers), the tool specs as it writes them, and hundreds of
tokens per image. So a prompt's tokens are modelled as linear in the features of a request
(:func:`prompt_features`): a constant, the characters of its messages' text (contents, tool
call names and arguments), its units of framing (messages, tool calls and tools), the
characters of its tool specs (name, description, JSON schema) and its images.

One ratio of tokens per character over all characters (what this replaced) cannot fit a
first turn, mostly system prompt and tool specs, and a tool-result turn, with more messages
and more framing per character at once: learned mostly on first turns, it reserved tool-result
turns 10 to 20 % below what sim:// counted, and a server enforcing the same limit refused them.

:class:`TokenEstimator` fits the weights to each answered request's ``usage.prompt_tokens``
by weighted least squares over recent replies (each older reply counts 0.98 times the next:
about the last 50). A prior counts as one reply more, the first, fading like the others: 4
characters a token, 4 tokens of framing per unit, 800 tokens an image. It is what the estimate
is before any reply, and a thousandth of it stays, so that a feature no reply has varied (the
tools, when every request offers the same) keeps its prior weight. Each reply it learns from
costs one solve of a 5 by 5 linear system.

What is reserved is the estimate and a margin: twice the root mean square of the estimates'
relative errors so far (each measured before the reply it was learned from; the prior's
assumed 15 %), so 30 % before the first reply and about the error's own size once the fit has
settled. A burst of requests sent into a full bucket sums their errors: without a margin,
estimates a few percent short at the start (fitted on one warm-up reply) got the last of the
burst refused. The completion is ``max_tokens`` or the mean completion so far, whichever is
less; a reply cut at its ``max_tokens`` does not count towards the mean (a warm-up request of
one token would otherwise have taught it that replies are one token long).

How far the estimates were from the counts is kept per request shape (:class:`RequestShape`: a
first turn, a turn after tool results, the forced final turn, any other) by
:class:`EstimateErrors`, and reported with the driver's rate statistics.

Pure: no clock, no I/O; the caller says what was sent and what the server counted.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Sequence

import attrs

from .events import CallModel
from .messages import AssistantMessage, ToolMessage, ToolSpec, UserMessage

__all__ = [
    "EstimateError",
    "EstimateErrors",
    "Features",
    "RequestShape",
    "TokenEstimator",
    "prompt_features",
    "shape_of",
]

Features = tuple[float, float, float, float, float]
"""A request's features: ``(1, text characters, units of framing, spec characters, images)``."""

_PRIOR: Features = (0.0, 0.25, 4.0, 0.25, 800.0)
"""Tokens per feature before any reply: none flat, 4 characters a token, 4 tokens of framing
per message, call or tool, 800 per image."""
_PRIOR_WEIGHT: Features = (1.0, 1e6, 25.0, 1e6, 1.0)
"""How firmly each prior holds: as much as one reply of 1,000 characters of text, 5 units of
framing, 1,000 characters of specs and one image would (each feature's square)."""
_DECAY = 0.98
"""Each older reply counts this much less than the next one (the prior too)."""
_FLOOR = 1e-3
"""The share of the prior that never fades: it keeps the fit where replies never varied a
feature (all with the same tools, say) and the system solvable."""
_PRIOR_SPREAD = 0.15
"""The relative error assumed of the prior (counted as one reply's error)."""
_MARGIN = 2.0
"""Root mean square errors added to a prompt's estimate when it is reserved."""
_SPEC_CHARS: dict[int, tuple[ToolSpec, int]] = {}
"""Spec characters by spec identity (the spec is kept, so its id stays its own)."""
_SPEC_CACHE = 1024


def _spec_chars(spec: ToolSpec) -> int:
    """Characters a tool's spec adds to a prompt: its name, description and JSON schema."""
    found = _SPEC_CHARS.get(id(spec))
    if found is not None and found[0] is spec:
        return found[1]
    try:
        schema = len(json.dumps(spec.parameters, default=str))
    except (TypeError, ValueError):
        schema = len(repr(spec.parameters))
    chars = len(spec.name) + len(spec.description) + schema
    if len(_SPEC_CHARS) >= _SPEC_CACHE:
        _SPEC_CHARS.clear()
    _SPEC_CHARS[id(spec)] = (spec, chars)
    return chars


def prompt_features(call: CallModel) -> Features:
    """The features of ``call``'s prompt (see the module's theory of operation)."""
    text = 0
    units = len(call.tools)
    images = 0
    for message in call.messages:
        units += 1
        if isinstance(message, AssistantMessage):
            text += len(message.content or "")
            for tool_call in message.tool_calls:
                units += 1
                text += len(tool_call.arguments) + len(tool_call.name)
        else:
            text += len(message.content)
            if isinstance(message, UserMessage):
                images += len(message.images)
    spec = 0
    for tool in call.tools:
        spec += _spec_chars(tool)
    return (1.0, float(text), float(units), float(spec), float(images))


class RequestShape(enum.Enum):
    """What kind of request an estimate was for (its errors are kept apart)."""

    FIRST = "first"  #: no model turn in the prompt yet
    TOOL_RESULTS = "tool_results"  #: the prompt ends with tool results
    FINAL = "final"  #: the forced final request (``hints.final``)
    OTHER = "other"  #: anything else (a repair turn, a continuation)

    __hash__ = object.__hash__


def shape_of(call: CallModel) -> RequestShape:
    """The shape of ``call``."""
    if call.hints.final:
        return RequestShape.FINAL
    messages = call.messages
    if messages and isinstance(messages[-1], ToolMessage):
        return RequestShape.TOOL_RESULTS
    if not any(isinstance(m, AssistantMessage) for m in messages):
        return RequestShape.FIRST
    return RequestShape.OTHER


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float] | None:
    """``x`` with ``matrix @ x == vector`` (Gaussian elimination, partial pivoting); ``None``
    when the matrix is singular."""
    size = len(vector)
    rows = [[*matrix[i], vector[i]] for i in range(size)]
    for column in range(size):
        pivot = max(range(column, size), key=lambda r: abs(rows[r][column]))
        if rows[pivot][column] == 0.0:
            return None
        rows[column], rows[pivot] = rows[pivot], rows[column]
        head = rows[column]
        for r in range(column + 1, size):
            factor = rows[r][column] / head[column]
            if factor:
                row = rows[r]
                for c in range(column, size + 1):
                    row[c] -= factor * head[c]
    solution = [0.0] * size
    for r in range(size - 1, -1, -1):
        row = rows[r]
        total = row[size] - sum(row[c] * solution[c] for c in range(r + 1, size))
        solution[r] = total / row[r]
    return solution


@attrs.define
class TokenEstimator:
    """Estimates a request's prompt and completion tokens, learning from replies' usage; see
    the module's theory of operation.

    Args:
        completion: the starting guess of completion tokens when ``max_tokens`` is not set.
    """

    completion: float = 256.0
    weights: list[float] = attrs.field(factory=lambda: list(_PRIOR))
    """Tokens per unit of each feature, as fitted so far."""
    spread: float = _PRIOR_SPREAD**2
    """The mean square of the estimates' relative errors so far (the prior's counted as one)."""
    _gram: list[list[float]] = attrs.field(
        factory=lambda: [[w if i == j else 0.0 for j, _ in enumerate(_PRIOR)]
                         for i, w in enumerate(_PRIOR_WEIGHT)],
        repr=False,
    )  # fmt: skip
    """The decayed sum of ``x x^T`` over replies, the prior's pseudo-reply included."""
    _moment: list[float] = attrs.field(
        factory=lambda: [w * p for w, p in zip(_PRIOR_WEIGHT, _PRIOR, strict=True)], repr=False
    )
    """The decayed sum of ``x y`` over replies, the prior's pseudo-reply included."""
    _seen: int = attrs.field(default=0, repr=False)
    _replies: int = attrs.field(default=0, repr=False)

    def prompt(self, features: Sequence[float]) -> int:
        """The prompt tokens of a request with ``features``: the fit's value (at least 1)."""
        total = sum(w * x for w, x in zip(self.weights, features, strict=True))
        return max(1, math.ceil(total))

    @property
    def margin(self) -> float:
        """The share added to a prompt's estimate when it is reserved: twice the estimates'
        root mean square relative error, at most one half."""
        return min(0.5, _MARGIN * math.sqrt(self.spread))

    def reserve(self, features: Sequence[float]) -> int:
        """The prompt tokens to reserve for a request with ``features``: its estimate and the
        :attr:`margin`."""
        return math.ceil(self.prompt(features) * (1.0 + self.margin))

    def reply(self, max_tokens: int | None) -> int:
        """The completion tokens to expect: the mean so far, at most ``max_tokens``."""
        mean = self.completion if max_tokens is None else min(max_tokens, self.completion)
        return math.ceil(mean)

    def estimate(self, features: Sequence[float], max_tokens: int | None) -> int:
        """The tokens to reserve for a request with ``features`` and ``max_tokens``: its
        prompt's (:meth:`reserve`) and its reply's."""
        return self.reserve(features) + self.reply(max_tokens)

    def learn(
        self,
        features: Sequence[float],
        prompt_tokens: int,
        completion_tokens: int,
        max_tokens: int | None = None,
    ) -> None:
        """Fit the weights again with one more answered request's usage (``max_tokens``: the
        request's; a reply that used all of it says only that the answer would have been at
        least that long, so it does not move the mean completion)."""
        self._seen += 1
        if completion_tokens >= 0 and (max_tokens is None or completion_tokens < max_tokens):
            self._replies += 1
            weight = max(1.0 / self._replies, 0.05)
            self.completion += weight * (completion_tokens - self.completion)
        if prompt_tokens <= 0:
            return
        error = (self.prompt(features) - prompt_tokens) / prompt_tokens
        self.spread += max(1.0 / (self._seen + 1), 0.05) * (error * error - self.spread)
        gram, moment = self._gram, self._moment
        size = len(moment)
        for i in range(size):
            xi = features[i]
            moment[i] = _DECAY * moment[i] + xi * prompt_tokens
            row = gram[i]
            for j in range(size):
                row[j] = _DECAY * row[j] + xi * features[j]
        system = [
            [gram[i][j] + (_FLOOR * _PRIOR_WEIGHT[i] if i == j else 0.0) for j in range(size)]
            for i in range(size)
        ]
        target = [moment[i] + _FLOOR * _PRIOR_WEIGHT[i] * _PRIOR[i] for i in range(size)]
        solved = _solve(system, target)
        if solved is not None and all(math.isfinite(w) for w in solved):
            self.weights = solved


@attrs.frozen
class EstimateError:
    """How far the prompt estimates of one :class:`RequestShape` of request were from the tokens the
    server counted (``usage.prompt_tokens``), as shares of the count."""

    shape: RequestShape
    requests: int
    """Answered requests of this shape whose estimate was compared."""
    mean: float
    """Mean of ``(estimate - counted) / counted``: negative when estimates ran short."""
    mean_abs: float
    """Mean of ``|estimate - counted| / counted``."""
    worst_short: float
    """The most an estimate ran short (``0.0``: none did; ``-0.1``: one was 10 % short)."""


@attrs.define
class EstimateErrors:
    """The errors of prompt estimates, kept per shape (four running sums each)."""

    _sums: dict[RequestShape, list[float]] = attrs.field(factory=dict)

    def record(self, shape: RequestShape, estimate: int, counted: int) -> None:
        """One estimate and what the server counted for the same request."""
        if counted <= 0:
            return
        error = (estimate - counted) / counted
        sums = self._sums.get(shape)
        if sums is None:
            sums = self._sums[shape] = [0.0, 0.0, 0.0, 0.0]
        sums[0] += 1
        sums[1] += error
        sums[2] += abs(error)
        sums[3] = min(sums[3], error)

    def summary(self) -> tuple[EstimateError, ...]:
        """One :class:`EstimateError` per shape seen, in the order of :class:`RequestShape`."""
        found = []
        for shape in RequestShape:
            sums = self._sums.get(shape)
            if sums is not None:
                count = sums[0]
                found.append(
                    EstimateError(shape, int(count), sums[1] / count, sums[2] / count, sums[3])
                )
        return tuple(found)
