"""OpenTelemetry spans for a driver, with the GenAI semantic conventions (``agentcore[otel]``).

Theory of operation
-------------------
:class:`OtelObserver` is an observer (:mod:`._observe.observer`) that needs only
``opentelemetry-api``; spans go to whatever tracer provider the application installed (none:
the API's no-op tracer). It is created only when ``open_driver(otel=True)`` asks for it, so the
import and every cost stay away from drivers that do not.

Spans, with trio times turned into wall-clock nanoseconds:

- ``invoke_agent`` per agent run (``gen_ai.operation.name=invoke_agent``), from its first
  effect to its result; status ERROR for a failed run.
- ``chat {model}`` per model request (``gen_ai.operation.name=chat``,
  ``gen_ai.request.model``, ``server.address``/``server.port``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.response.finish_reasons``), child of its run, from the first wait for a slot to the
  final outcome. Span events: ``slot_acquired`` (with the wait) per attempt,
  ``attempt_failed`` (error kind, HTTP status), ``retry`` (the back-off). ``error.type`` and
  status ERROR when it failed for good.
- ``execute_tool {name}`` per tool execution (``gen_ai.operation.name=execute_tool``,
  ``gen_ai.tool.name``), child of the run whose call started it, with
  ``agentcore.tool.waiters``. Each run whose call joined an execution already running gets its
  own ``execute_tool`` span linked to that one execution.

The run a tool hook belongs to is found through the driver's ``CURRENT_RUN`` context variable
(see :mod:`agentcore._observe.observer`): trio copies the context into tasks a run spawns
(parallel tool calls, and the shared tool execution, which the first caller's task starts), so
they see it too. What is kept is bounded by what is in flight: open runs, open requests,
running executions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from .observer import CURRENT_RUN

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from .._codecs.exchange import Exchange
    from .._core.events import CallModel, ModelError, ModelFailed, ModelResponded, ToolError
    from .._core.results import Result

__all__ = ["OtelObserver"]


class OtelObserver:
    """Emits OpenTelemetry spans for the runs, model requests and tool executions of a driver.

    Args:
        model: the model name (``gen_ai.request.model``).
        base_url: the backend's URL, for ``server.address`` and ``server.port``.
        tracer: the tracer to use (default: ``agentcore`` from the global provider).
    """

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
        self._requests: dict[str, Span] = {}

    def _ns(self, t: float) -> int:
        return self._offset_ns + int(t * 1e9)

    # -------------------------------------------------------------------- runs

    def run_started(self, index: int, now: float) -> None:
        span = self._tracer.start_span(
            "invoke_agent",
            kind=SpanKind.INTERNAL,
            start_time=self._ns(now),
            attributes={"gen_ai.operation.name": "invoke_agent", "agentcore.agent.index": index},
        )
        self._runs[index] = span

    def _current_run(self) -> Span | None:
        index = CURRENT_RUN.get()
        return None if index is None else self._runs.get(index)

    def run_ended(self, result: Result, now: float) -> None:
        span = self._runs.pop(result.index, None)
        if span is None:
            return
        span.set_attribute("agentcore.agent.status", result.status)
        span.set_attribute("agentcore.agent.turns", result.turns)
        span.set_attribute("gen_ai.usage.input_tokens", result.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
        if result.status != "ok" and result.error is not None:
            span.set_attribute("error.type", result.error.kind.value)
            span.set_status(Status(StatusCode.ERROR, result.error.message[:200]))
        span.end(end_time=self._ns(now))

    # -------------------------------------------------------------------- model requests

    def queued(self, call: CallModel, run: int | None, now: float) -> None:
        if call.request_id in self._requests:
            return  # a retry: the request's span is open already
        parent = self._runs.get(run) if run is not None else self._current_run()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self._model,
            **self._server,
        }
        if call.params.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = call.params.max_tokens
        if call.params.temperature is not None:
            attributes["gen_ai.request.temperature"] = call.params.temperature
        self._requests[call.request_id] = self._tracer.start_span(
            f"chat {self._model}".strip(),
            context=trace.set_span_in_context(parent) if parent is not None else None,
            kind=SpanKind.CLIENT,
            start_time=self._ns(now),
            attributes=attributes,
        )

    def attempt_started(
        self, call: CallModel, run: int | None, attempt: int, wait: float, now: float
    ) -> Any:
        span = self._requests.get(call.request_id)
        if span is not None:
            span.add_event(
                "slot_acquired",
                {"agentcore.attempt": attempt, "agentcore.slot_wait": wait},
                timestamp=self._ns(now),
            )
        return call.request_id

    def attempt_ended(self, token: Any, exchange: Exchange | None, now: float) -> None:
        span = self._requests.get(token)
        if span is None:
            return
        if exchange is None:
            span.add_event("attempt_cancelled", timestamp=self._ns(now))
            return
        if exchange.ttft is not None:
            span.set_attribute("agentcore.ttft", exchange.ttft)
        error = getattr(exchange.event, "error", None)
        if error is not None:
            attributes: dict[str, Any] = {"error.type": error.kind.value}
            if error.status is not None:
                attributes["http.response.status_code"] = error.status
            span.add_event("attempt_failed", attributes, timestamp=self._ns(now))

    def backoff(
        self, call: CallModel, run: int | None, error: ModelError, wait: float, now: float
    ) -> None:
        span = self._requests.get(call.request_id)
        if span is not None:
            span.add_event(
                "retry",
                {"agentcore.backoff": wait, "error.type": error.kind.value},
                timestamp=self._ns(now),
            )

    def request_ended(
        self, call: CallModel, event: ModelResponded | ModelFailed, now: float
    ) -> None:
        span = self._requests.pop(call.request_id, None)
        if span is None:
            return
        error = getattr(event, "error", None)
        if error is not None:
            span.set_attribute("error.type", error.kind.value)
            span.set_status(Status(StatusCode.ERROR, error.message[:200]))
        else:
            usage = event.usage  # type: ignore[union-attr]
            span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
            if usage.cached_tokens is not None:
                span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens)
            reason = event.finish_reason  # type: ignore[union-attr]
            if reason:
                span.set_attribute("gen_ai.response.finish_reasons", [reason])
        span.end(end_time=self._ns(now))

    # -------------------------------------------------------------------- tools

    def _tool_span(self, name: str, now: float, links: list[Link] | None = None) -> Span:
        parent = self._current_run()
        return self._tracer.start_span(
            f"execute_tool {name}",
            context=trace.set_span_in_context(parent) if parent is not None else None,
            kind=SpanKind.INTERNAL,
            start_time=self._ns(now),
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
            links=links,
        )

    def tool_started(self, name: str, now: float) -> Any:
        return (self._tool_span(name, now), name, [])

    def tool_joined(self, token: Any, now: float) -> None:
        execution, name, joined = token
        link = Link(execution.get_span_context(), {"agentcore.coalesced": True})
        joined.append(self._tool_span(name, now, [link]))

    def tool_ended(self, token: Any, error: ToolError | None, waiters: int, now: float) -> None:
        execution, _, joined = token
        end = self._ns(now)
        for span in (execution, *joined):
            span.set_attribute("agentcore.tool.waiters", waiters)
            if error is not None:
                span.set_attribute("error.type", error.type)
                span.set_status(Status(StatusCode.ERROR, error.message[:200]))
            span.end(end_time=end)

    # -------------------------------------------------------------------- end

    def close(self) -> None:
        """End what is still open (runs and requests cut short by a cancellation)."""
        end = time.time_ns()
        for span in (*self._requests.values(), *self._runs.values()):
            span.end(end_time=end)
        self._requests.clear()
        self._runs.clear()
