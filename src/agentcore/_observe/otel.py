"""OpenTelemetry spans for a driver, with the GenAI semantic conventions (``trio-agentcore[otel]``).

Theory of operation
-------------------
:class:`OtelObserver` is a step sink (:mod:`agentcore._observe.steps`) that needs only
``opentelemetry-api``; spans go to whatever tracer provider the application installed (none:
the API's no-op tracer). It is created only when ``open_driver(otel=True)`` asks for it, so the
import and every cost stay away from drivers that do not.

Spans, with trio times turned into wall-clock nanoseconds:

- ``invoke_agent`` per agent run (``gen_ai.operation.name=invoke_agent``), from
  :class:`RunStarted` to the run's end (``agentcore.agent.index``, ``agentcore.run.id``,
  ``agentcore.agent.status``, ``agentcore.agent.turns``, usage); status ERROR for a failed
  run. Runs are keyed by their run id, so concurrent runs never share a span.
- ``chat {model}`` per model request (``gen_ai.operation.name=chat``,
  ``gen_ai.request.model``, ``server.address``/``server.port``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.response.finish_reasons``), child of its run, from the first wait for a slot to the
  final outcome. Span events: ``slot_acquired`` (with the wait) per attempt,
  ``attempt_failed`` (error kind, HTTP status), ``retry`` (the back-off),
  ``attempt_cancelled`` when its run ended while it held a slot. ``error.type`` and status
  ERROR when it failed for good.
- ``execute_tool {name}`` per tool call (``gen_ai.operation.name=execute_tool``,
  ``gen_ai.tool.name``), child of its run, with ``agentcore.tool.source`` (``executed``,
  ``coalesced``, ``cached``) and, for an execution, ``agentcore.tool.waiters`` (the calls it
  answered). It is made when the call ends, with its start set back by its duration.

What is kept is bounded by what is in flight: open runs and open requests.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .steps import (
    ModelReplied,
    RequestFailed,
    RequestQueued,
    RequestStarted,
    RetryScheduled,
    RunAborted,
    RunFinished,
    RunStarted,
    ToolEnded,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from .steps import (
        StepEvent,
    )

__all__ = ["OtelObserver"]


class OtelObserver:
    """Emits OpenTelemetry spans for the runs, model requests and tool calls of a driver.

    Args:
        model: the model name (``gen_ai.request.model``).
        base_url: the backend's URL, for ``server.address`` and ``server.port``.
        tracer: the tracer to use (default: ``agentcore`` from the global provider).
    """

    deltas = False

    def __init__(
        self, *, model: str = "", base_url: str | None = None, tracer: Tracer | None = None
    ) -> None:
        self._tracer = tracer or trace.get_tracer("agentcore")
        self._model = model
        self._server: dict[str, Any] = {}
        if base_url:
            parts = urlsplit(base_url)
            if parts.hostname:
                self._server["server.address"] = parts.hostname
                port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
                if port:
                    self._server["server.port"] = port
        self._offset_ns = time.time_ns() - int(trio.current_time() * 1e9)
        self._runs: dict[int, Span] = {}
        self._requests: dict[tuple[int | None, str], Span] = {}

    def _ns(self, t: float) -> int:
        return self._offset_ns + int(t * 1e9)

    def _child_of(self, run: int | None) -> Any:
        parent = None if run is None else self._runs.get(run)
        return None if parent is None else trace.set_span_in_context(parent)

    def push(self, event: StepEvent) -> None:
        """Turn ``event`` into span changes (a step sink's ``push``)."""
        kind = type(event)
        if kind is RequestStarted:
            assert isinstance(event, RequestStarted)
            span = self._requests.get((event.run, event.request_id))
            if span is not None:
                span.add_event(
                    "slot_acquired",
                    {"agentcore.attempt": event.attempt, "agentcore.slot_wait": event.slot_wait},
                    timestamp=self._ns(event.at),
                )
        elif kind is RequestQueued:
            self._queued(event)  # type: ignore[arg-type]
        elif kind is ModelReplied or kind is RequestFailed:
            self._request_ended(event)  # type: ignore[arg-type]
        elif kind is RetryScheduled:
            assert isinstance(event, RetryScheduled)
            span = self._requests.get((event.run, event.request_id))
            if span is not None:
                self._attempt_failed(span, event)
                span.add_event(
                    "retry",
                    {"agentcore.backoff": event.delay, "error.type": event.error.kind.value},
                    timestamp=self._ns(event.at),
                )
        elif kind is ToolEnded:
            self._tool_ended(event)  # type: ignore[arg-type]
        elif kind is RunStarted:
            assert isinstance(event, RunStarted)
            self._runs[event.run] = self._tracer.start_span(
                "invoke_agent",
                kind=SpanKind.INTERNAL,
                start_time=self._ns(event.at),
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "agentcore.agent.index": event.index,
                    "agentcore.run.id": event.run,
                },
            )
        elif kind is RunFinished or kind is RunAborted:
            self._run_ended(event)  # type: ignore[arg-type]

    async def settle(self) -> None:
        """Never waits."""

    # -------------------------------------------------------------------- runs

    def _run_ended(self, event: RunFinished | RunAborted) -> None:
        end = self._ns(event.at)
        for key in [k for k in self._requests if k[0] == event.run]:
            request = self._requests.pop(key)
            request.add_event("attempt_cancelled", timestamp=end)
            request.end(end_time=end)
        span = self._runs.pop(event.run, None)
        if span is None:
            return
        span.set_attribute("agentcore.agent.status", event.status)
        span.set_attribute("agentcore.agent.turns", event.turns)
        span.set_attribute("gen_ai.usage.input_tokens", event.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", event.usage.completion_tokens)
        if isinstance(event, RunAborted):
            span.set_attribute("error.type", event.reason.kind.value)
            span.set_status(Status(StatusCode.ERROR, event.reason.message[:200]))
        span.end(end_time=end)

    # -------------------------------------------------------------------- model requests

    def _queued(self, event: RequestQueued) -> None:
        key = (event.run, event.request_id)
        if key in self._requests:
            return  # a retry: the request's span is open already
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self._model,
            **self._server,
        }
        if event.params.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = event.params.max_tokens
        if event.params.temperature is not None:
            attributes["gen_ai.request.temperature"] = event.params.temperature
        self._requests[key] = self._tracer.start_span(
            f"chat {self._model}".strip(),
            context=self._child_of(event.run),
            kind=SpanKind.CLIENT,
            start_time=self._ns(event.at),
            attributes=attributes,
        )

    def _attempt_failed(self, span: Span, event: RetryScheduled | RequestFailed) -> None:
        attributes: dict[str, Any] = {"error.type": event.error.kind.value}
        if event.error.status is not None:
            attributes["http.response.status_code"] = event.error.status
        span.add_event("attempt_failed", attributes, timestamp=self._ns(event.at))

    def _request_ended(self, event: ModelReplied | RequestFailed) -> None:
        span = self._requests.pop((event.run, event.request_id), None)
        if span is None:
            return
        if isinstance(event, RequestFailed):
            self._attempt_failed(span, event)
            span.set_attribute("error.type", event.error.kind.value)
            span.set_status(Status(StatusCode.ERROR, event.error.message[:200]))
        else:
            if event.ttft is not None:
                span.set_attribute("agentcore.ttft", event.ttft)
            usage = event.usage
            span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
            if usage.cached_tokens is not None:
                span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens)
            if event.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
        span.end(end_time=self._ns(event.at))

    # -------------------------------------------------------------------- tools

    def _tool_ended(self, event: ToolEnded) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool,
            "gen_ai.tool.call.id": event.call_id,
            "agentcore.tool.source": event.source,
        }
        if event.source == "executed":
            attributes["agentcore.tool.waiters"] = event.calls
        span = self._tracer.start_span(
            f"execute_tool {event.tool}",
            context=self._child_of(event.run),
            kind=SpanKind.INTERNAL,
            start_time=self._ns(event.at - event.duration),
            attributes=attributes,
        )
        if event.error is not None:
            span.set_attribute("error.type", event.error.type)
            span.set_status(Status(StatusCode.ERROR, event.error.message[:200]))
        span.end(end_time=self._ns(event.at))

    # -------------------------------------------------------------------- end

    def close(self) -> None:
        """End what is still open (runs and requests cut short by a cancellation)."""
        end = time.time_ns()
        for span in (*self._requests.values(), *self._runs.values()):
            span.end(end_time=end)
        self._requests.clear()
        self._runs.clear()
