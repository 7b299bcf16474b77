"""Hypothesis strategies for agentcore values.

Use them to property-test code that consumes or produces agentcore values: policies that
decide on model replies, schedulers, drivers, serialisers. Every value drawn here is valid for
its type and round-trips exactly through ``dumps``/``loads`` (agentcore.core): strings hold
no lone surrogates, floats are finite, integers fit in 64 bits, and JSON values are built from
``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None`` only.

Example::

    from hypothesis import given
    from agentcore.testing import strategies as acst

    @given(acst.assistant_replies(tool_names=["search", "read"], unknown_tools=True))
    def test_policy_never_crashes(reply):
        my_policy(reply)

Strategies that build ids take an optional ``ids`` strategy, so tests can draw ids from a small
pool (and provoke collisions) or pin them to the ids a loop expects.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .._core import events as ev
from .._core.error_policy import policy_of
from .._core.messages import (
    AgentHints,
    AssistantMessage,
    Image,
    Message,
    ModelParams,
    OutputSpec,
    ServerTiming,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

__all__ = [
    "abort_reasons",
    "assistant_messages",
    "assistant_replies",
    "effects",
    "events",
    "hints",
    "identifiers",
    "json_objects",
    "json_values",
    "messages",
    "model_errors",
    "model_params",
    "output_specs",
    "server_timings",
    "system_messages",
    "tool_calls",
    "tool_errors",
    "tool_messages",
    "tool_specs",
    "usages",
    "user_messages",
]


_I64_MIN = -(2**63)
_U64_MAX = 2**64 - 1
_TOKENS_MAX = 2**31 - 1


def _texts(max_size: int = 40) -> SearchStrategy[str]:
    # Hypothesis' default alphabet excludes surrogates, so every string encodes as UTF-8.
    return st.text(max_size=max_size)


def _finite_floats(
    min_value: float | None = None, max_value: float | None = None
) -> SearchStrategy[float]:
    return st.floats(min_value, max_value, allow_nan=False, allow_infinity=False)


def _counts(max_value: int = _TOKENS_MAX) -> SearchStrategy[int]:
    return st.integers(0, max_value)


def _optional(strategy: SearchStrategy[Any]) -> SearchStrategy[Any]:
    return st.none() | strategy


# ----------------------------------------------------------------------------- JSON


def identifiers(*, max_size: int = 16) -> SearchStrategy[str]:
    """Non-empty ASCII ids of the kind servers and loops assign (``call_0``, ``run-7``...).

    Args:
        max_size: the longest id drawn.
    """
    return st.text(
        alphabet=string.ascii_letters + string.digits + "_-./", min_size=1, max_size=max_size
    )


def json_values(*, max_leaves: int = 8) -> SearchStrategy[Any]:
    """Any JSON value: ``None``, booleans, 64-bit integers, finite floats, strings, and lists and
    string-keyed dicts of these.

    Args:
        max_leaves: bound on the number of scalars in one value.
    """
    scalars = (
        st.none() | st.booleans() | st.integers(_I64_MIN, _U64_MAX) | _finite_floats() | _texts()
    )
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(_texts(12), children, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def json_objects(*, max_size: int = 4) -> SearchStrategy[dict[str, Any]]:
    """JSON objects (string-keyed dicts of :func:`json_values`), such as tool arguments.

    Args:
        max_size: the most keys one object has at the top level.
    """
    return st.dictionaries(_texts(12), json_values(max_leaves=4), max_size=max_size)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _invalid_json_texts() -> SearchStrategy[str]:
    """Texts that are not a JSON object: truncated objects, prose, arrays, empty text."""
    truncated = json_objects().filter(bool).map(lambda obj: _json_text(obj)[:-1])
    prose = _texts().filter(lambda text: not _is_json_object(text))
    return st.one_of(
        st.just(""),
        truncated,
        prose,
        st.lists(json_values(max_leaves=3), max_size=3).map(_json_text),
    )


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


# ----------------------------------------------------------------------------- messages


def tool_calls(
    *,
    names: SearchStrategy[str] | None = None,
    ids: SearchStrategy[str] | None = None,
    arguments: SearchStrategy[str] | None = None,
) -> SearchStrategy[ToolCall]:
    """Tool calls as a model emits them.

    Args:
        names: tool names (default: :func:`identifiers`).
        ids: call ids (default: :func:`identifiers`).
        arguments: the raw arguments text (default: a JSON object, as text).
    """
    return st.builds(
        ToolCall,
        id=ids if ids is not None else identifiers(),
        name=names if names is not None else identifiers(),
        arguments=arguments if arguments is not None else json_objects().map(_json_text),
    )


def system_messages() -> SearchStrategy[SystemMessage]:
    """System prompts."""
    return st.builds(SystemMessage, content=_texts(80))


@st.composite
def _user_message(draw: st.DrawFn) -> UserMessage:
    content = draw(_texts(80))
    offsets = st.none() | st.integers(0, len(content))
    images = draw(
        st.lists(
            st.builds(
                Image,
                data=st.binary(min_size=1, max_size=24),
                media_type=st.sampled_from(["image/png", "image/jpeg"]),
                at=offsets,
            )
            | st.builds(
                Image,
                url=st.sampled_from(["https://example.com/a.png", "data:image/gif;base64,R0lG"]),
                at=offsets,
            ),
            max_size=2,
        )
    )
    return UserMessage(content, tuple(images))


def user_messages() -> SearchStrategy[UserMessage]:
    """User turns, sometimes with images (bytes or URLs, placed or not)."""
    return _user_message()


def assistant_messages(*, max_calls: int = 3) -> SearchStrategy[AssistantMessage]:
    """Assistant turns of any shape: text or ``None``, with zero or more tool calls (including
    the degenerate turn with neither). See :func:`assistant_replies` for realistic replies.

    Args:
        max_calls: the most tool calls in one message.
    """
    return st.builds(
        AssistantMessage,
        content=_optional(_texts(80)),
        tool_calls=st.lists(tool_calls(), max_size=max_calls).map(tuple),
    )


def tool_messages() -> SearchStrategy[ToolMessage]:
    """Tool results as shown to the model, successful or not."""
    return st.builds(
        ToolMessage,
        call_id=identifiers(),
        name=identifiers(),
        content=_texts(80),
        is_error=st.booleans(),
    )


def messages() -> SearchStrategy[Message]:
    """Any :data:`~agentcore.core.Message`: system, user, assistant or tool."""
    return st.one_of(system_messages(), user_messages(), assistant_messages(), tool_messages())


@st.composite
def usages(draw: st.DrawFn, *, cached: bool | None = None) -> Usage:
    """Token usage of one reply, with ``cached_tokens <= prompt_tokens`` when it is known.

    Args:
        cached: ``True`` to always report cached tokens, ``False`` to never report them
            (``cached_tokens is None``), ``None`` for either.
    """
    prompt = draw(_counts())
    report = draw(st.booleans()) if cached is None else cached
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=draw(_counts()),
        cached_tokens=draw(st.integers(0, prompt)) if report else None,
    )


def server_timings() -> SearchStrategy[ServerTiming]:
    """Server-reported timings; every field may be missing."""
    millis = _optional(_finite_floats(0.0, 1e7))
    return st.builds(
        ServerTiming,
        ttft_ms=millis,
        prefill_time_ms=millis,
        prefill_wait_time_ms=millis,
        total_time_ms=millis,
        kv_hit_rate=_optional(_finite_floats(0.0, 1.0)),
        router_queue_depth=_optional(_counts(10_000)),
        worker_id=_optional(_counts()),
    )


def hints(*, session_ids: SearchStrategy[str] | None = None) -> SearchStrategy[AgentHints]:
    """Serving hints of one model request.

    Args:
        session_ids: session ids (default: :func:`identifiers`); also used for the parent.
    """
    sessions = session_ids if session_ids is not None else identifiers()
    return st.builds(
        AgentHints,
        session_id=sessions,
        parent_session_id=_optional(sessions),
        turn=_counts(1_000),
        priority=st.integers(-1_000, 1_000),
        expected_output_tokens=_optional(st.integers(1, 100_000)),
        final=st.booleans(),
    )


def model_params() -> SearchStrategy[ModelParams]:
    """Sampling parameters."""
    return st.builds(
        ModelParams,
        max_tokens=_optional(st.integers(1, 1_000_000)),
        temperature=_optional(_finite_floats(0.0, 2.0)),
        top_p=_optional(_finite_floats(0.0, 1.0)),
        tool_choice=st.sampled_from([None, "auto", "none", "required"]),
        stop=st.lists(_texts(8), max_size=3).map(tuple),
        seed=_optional(st.integers(0, 2**32 - 1)),
    )


def _object_schemas() -> SearchStrategy[dict[str, Any]]:
    kinds = st.sampled_from(["string", "integer", "number", "boolean", "array", "object"])
    properties = st.dictionaries(identifiers(), kinds.map(lambda kind: {"type": kind}), max_size=4)
    return properties.map(lambda props: {"type": "object", "properties": props})


def tool_specs(*, names: SearchStrategy[str] | None = None) -> SearchStrategy[ToolSpec]:
    """Tool specifications with an object JSON schema (and the default validator).

    Args:
        names: tool names (default: :func:`identifiers`).
    """
    return st.builds(
        ToolSpec,
        name=names if names is not None else identifiers(),
        description=_texts(),
        parameters=_object_schemas(),
    )


def output_specs() -> SearchStrategy[OutputSpec]:
    """Structured-output specifications (a name and an object JSON schema)."""
    return st.builds(OutputSpec, name=identifiers(), schema=_object_schemas())


# ----------------------------------------------------------------------------- errors


@st.composite
def model_errors(draw: st.DrawFn, *, kinds: Sequence[ev.ErrorKind] | None = None) -> ev.ModelError:
    """Classified model failures. ``retryable`` follows the kind's row in the error table, as
    the classifier sets it (rate limits, overload, server errors, timeouts, conflicts,
    connection failures and garbled replies are retryable), and only retryable errors carry
    ``retry_after``.

    Args:
        kinds: the error kinds to draw from (default: all).
    """
    kind = draw(st.sampled_from(list(kinds) if kinds is not None else list(ev.ErrorKind)))
    retryable = policy_of(kind).retryable
    return ev.ModelError(
        kind=kind,
        message=draw(_texts()),
        status=draw(_optional(st.integers(400, 599))),
        retryable=retryable,
        retry_after=draw(_optional(_finite_floats(0.0, 3600.0))) if retryable else None,
        code=draw(_optional(identifiers())),
    )


def tool_errors() -> SearchStrategy[ev.ToolError]:
    """Tool failures: an exception type name (or category) and a message."""
    return st.builds(ev.ToolError, type=identifiers(), message=_texts())


@st.composite
def abort_reasons(draw: st.DrawFn) -> ev.AbortReason:
    """Reasons for ``Abort``; ``MODEL_FAILED`` reasons carry the model error."""
    kind = draw(st.sampled_from(list(ev.AbortKind)))
    error = draw(model_errors()) if kind is ev.AbortKind.MODEL_FAILED else None
    return ev.AbortReason(kind=kind, message=draw(_texts()), error=error)


# ----------------------------------------------------------------------------- events


def events(
    *,
    request_ids: SearchStrategy[str] | None = None,
    call_ids: SearchStrategy[str] | None = None,
) -> SearchStrategy[ev.Event]:
    """Any :data:`~agentcore.core.Event`.

    Args:
        request_ids: ids for ``ModelResponded``/``ModelFailed`` (default:
            :func:`identifiers`). Pass ``st.just(current_id)`` to aim at a loop's request.
        call_ids: ids for ``ToolReturned``/``ToolFailed`` (default: :func:`identifiers`).
    """
    requests = request_ids if request_ids is not None else identifiers()
    calls = call_ids if call_ids is not None else identifiers()
    return st.one_of(
        st.builds(
            ev.ModelResponded,
            request_id=requests,
            message=assistant_messages(),
            usage=usages(),
            finish_reason=st.sampled_from([None, "stop", "tool_calls", "length"]),
            timing=_optional(server_timings()),
        ),
        st.builds(ev.ModelFailed, request_id=requests, error=model_errors()),
        st.builds(ev.ToolReturned, call_id=calls, content=_texts(80)),
        st.builds(ev.ToolFailed, call_id=calls, error=tool_errors()),
        st.builds(ev.CancelRequested, reason=_texts()),
    )


def effects() -> SearchStrategy[ev.Effect]:
    """Any :data:`~agentcore.core.Effect`. ``Finish.output`` is a JSON value (see
    :func:`json_values`), the form it has after a round trip through ``agentcore.core.loads``."""
    transcripts = st.lists(messages(), max_size=4).map(tuple)
    return st.one_of(
        st.builds(
            ev.CallModel,
            request_id=identifiers(),
            messages=transcripts,
            tools=st.lists(tool_specs(), max_size=3).map(tuple),
            params=model_params(),
            hints=hints(),
            output=_optional(output_specs()),
        ),
        st.builds(
            ev.CallTool,
            call_id=identifiers(),
            name=identifiers(),
            arguments=json_objects(),
            idempotency_key=identifiers(),
        ),
        st.builds(ev.Finish, output=json_values(), transcript=transcripts, usage=usages()),
        st.builds(ev.Abort, reason=abort_reasons(), transcript=transcripts, usage=usages()),
    )


# ----------------------------------------------------------------------------- replies


def assistant_replies(
    tool_names: Sequence[str] = (),
    *,
    arguments: SearchStrategy[Mapping[str, Any]]
    | Mapping[str, SearchStrategy[Mapping[str, Any]]]
    | None = None,
    text: bool | None = None,
    max_calls: int = 4,
    invalid_arguments: bool = False,
    unknown_tools: bool = False,
) -> SearchStrategy[AssistantMessage]:
    """Assistant messages as a model plausibly returns them: text, tool calls, or both.

    Tool calls name one of ``tool_names`` and carry a JSON object as arguments text. Call ids
    are distinct within a reply. A reply always has text or at least one call.

    Args:
        tool_names: the tools the model was offered. With none (and ``unknown_tools``
            false), replies are text only.
        arguments: what a valid call's arguments look like: one strategy of JSON objects
            for every tool, or a mapping from tool name to such a strategy (tools missing
            from it use :func:`json_objects`). Default: :func:`json_objects`.
        text: ``True`` to always include text, ``False`` for ``content=None`` whenever the
            reply has calls, ``None`` for either.
        max_calls: the most tool calls in one reply.
        invalid_arguments: let some calls carry arguments that are not a JSON object
            (truncated JSON, prose, arrays, empty text).
        unknown_tools: let some calls name tools that are not in ``tool_names``.
    """
    names = list(tool_names)
    default_arguments = json_objects()
    if arguments is None or isinstance(arguments, SearchStrategy):
        shared = default_arguments if arguments is None else arguments
        per_tool = {}
    else:
        shared = default_arguments
        per_tool = dict(arguments)
    known = st.sampled_from(names) if names else None
    unknown = identifiers().filter(lambda name: name not in names) if unknown_tools else None
    call_names = st.one_of([s for s in (known, unknown) if s is not None])
    invalid = _invalid_json_texts()

    @st.composite
    def draw_reply(draw: st.DrawFn) -> AssistantMessage:
        calls: list[ToolCall] = []
        if known is not None or unknown is not None:
            count = draw(st.integers(0, max_calls))
            call_ids = draw(st.lists(identifiers(), min_size=count, max_size=count, unique=True))
            for call_id in call_ids:
                name = draw(call_names)
                if invalid_arguments and draw(st.booleans()):
                    raw = draw(invalid)
                else:
                    raw = _json_text(draw(per_tool.get(name, shared)))
                calls.append(ToolCall(id=call_id, name=name, arguments=raw))
        with_text = (not calls) or (draw(st.booleans()) if text is None else text)
        content = draw(_texts(80)) if with_text else None
        return AssistantMessage(content=content, tool_calls=tuple(calls))

    return draw_reply()
