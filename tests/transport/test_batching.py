"""The batch client's hop mechanics against a scripted Batch API, in virtual time: the poll
back-off, a failed submission, a call cancelled before its hop is submitted."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import trio

from agentcore import Task, run_batch
from agentcore._codecs.http import HttpRequest
from agentcore._codecs.openai import OpenAICodec
from agentcore._core.errors import TransportError, TransportErrorKind
from agentcore._transports.batch_api import BatchError, BatchState, Channel, LineSink
from agentcore._transports.batch_journal import BatchJournal
from agentcore._transports.batching import BatchModelClient

ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}


@attrs.define
class ScriptedBatches:
    """A Batch API that ends each batch after ``polls`` polls and can refuse submissions."""

    polls: int = 1
    refuse: int = 0
    unanswered: int = 0
    fail_line: int | None = None
    """The first batch fails validation because of this line (1-based), as OpenAI's may."""
    name: str = "openai-batch"
    max_requests: int = 100
    max_bytes: int = 1 << 20
    submitted: list[list[str]] = attrs.Factory(list)
    poll_times: list[float] = attrs.Factory(list)
    cancelled: list[str] = attrs.Factory(list)
    _seen: dict[str, int] = attrs.Factory(dict)

    def line(self, custom_id: str, request: HttpRequest) -> bytes:
        return custom_id.encode()

    async def submit(self, channel: Channel, lines: list[bytes], tag: str) -> str:
        if self.refuse:
            self.refuse -= 1
            raise TransportError(TransportErrorKind.CONNECT, "no route to the batch API")
        self.submitted.append([line.decode() for line in lines])
        return f"b{len(self.submitted)}"

    async def find(self, channel: Channel, tag: str) -> str | None:
        return None

    async def poll(self, channel: Channel, batch_id: str) -> BatchState:
        self.poll_times.append(trio.current_time())
        seen = self._seen[batch_id] = self._seen.get(batch_id, 0) + 1
        ended = seen >= self.polls
        if ended and self.fail_line is not None and batch_id == "b1":
            error = BatchError("invalid_request", "line 2 is wrong", self.fail_line)
            return BatchState("failed", True, batch_id=batch_id, errors=(error,))
        return BatchState("completed" if ended else "in_progress", ended, batch_id=batch_id)

    async def download(self, channel: Channel, state: BatchState, sink: LineSink) -> None:
        if self.unanswered:  # as an expired batch: the provider answers none of its lines
            self.unanswered -= 1
            return
        for custom_id in self.submitted[int(state.batch_id[1:]) - 1]:
            sink(custom_id, 200, orjson.dumps(ANSWER))

    async def cancel(self, channel: Channel, batch_id: str) -> None:
        self.cancelled.append(batch_id)

    async def clean_up(self, channel: Channel, state: BatchState) -> None:
        pass


class NoTransport:
    async def aclose(self) -> None:
        pass


def _client(api: ScriptedBatches, gather: float, poll: float, poll_max: float = 60.0) -> Any:
    codec = OpenAICodec(base_url="http://batch.invalid/v1", model="m")
    transport: Any = NoTransport()
    return BatchModelClient(codec, transport, api, BatchJournal(), "m", gather=gather, poll=poll,
                            poll_max=poll_max)  # fmt: skip


TASK: Task[Any] = Task(prompt="Say done about {n}.")


async def test_a_hop_is_polled_with_growing_waits_up_to_poll_max(autojump_clock: Any) -> None:
    api = ScriptedBatches(polls=6)
    client = _client(api, gather=0.5, poll=1.0, poll_max=3.0)
    results = await run_batch(TASK, [{"n": 1}, {"n": 2}], backend=client)
    assert [r.output for r in results] == ["done", "done"]
    assert len(api.submitted) == 1
    assert len(api.submitted[0]) == 2  # both calls in one hop
    waits = [round(b - a, 3) for a, b in zip(api.poll_times, api.poll_times[1:], strict=False)]
    assert waits == [1.5, 2.25, 3.0, 3.0, 3.0]


async def test_a_failed_submission_fails_its_calls_and_the_retry_sends_them_in_a_new_hop(
    autojump_clock: Any,
) -> None:
    api = ScriptedBatches(refuse=1)
    client = _client(api, gather=0.1, poll=0.1)
    results = await run_batch(TASK, [{"n": 1}, {"n": 2}, {"n": 3}], backend=client)
    assert all(r.status == "ok" for r in results)
    # The refused hop sent nothing; each call went into a later hop once (the retries'
    # jittered back-off may spread them over more than one).
    assert sum(len(ids) for ids in api.submitted) == 3
    assert client.submitted == len(api.submitted) >= 1


async def test_a_call_cancelled_while_its_hop_gathers_leaves_the_hop(autojump_clock: Any) -> None:
    api = ScriptedBatches()
    client = _client(api, gather=1.0, poll=0.1)
    with trio.move_on_after(0.5):  # cancelled during the gather window
        await run_batch(TASK, [{"n": 1}], backend=client)
    results = await run_batch(TASK, [{"n": 2}], backend=client)
    assert [r.output for r in results] == ["done"]
    assert [len(ids) for ids in api.submitted] == [1]  # only the second call was sent


async def test_unanswered_lines_are_retried_in_later_hops_even_twice_in_a_row(
    autojump_clock: Any,
) -> None:
    api = ScriptedBatches(unanswered=2)
    client = _client(api, gather=0.1, poll=0.1)
    results = await run_batch(TASK, [{"n": 1}], backend=client)
    assert [r.output for r in results] == ["done"]
    assert len(api.submitted) == 3  # unanswered in two batches, answered in the third


async def test_a_batch_failed_for_one_line_fails_that_call_and_sends_the_others_again(
    autojump_clock: Any,
) -> None:
    api = ScriptedBatches(fail_line=2)
    client = _client(api, gather=0.1, poll=0.1)
    results = await run_batch(TASK, [{"n": 1}, {"n": 2}, {"n": 3}], backend=client)
    assert [r.status for r in results].count("failed") == 1  # the line the provider named
    failed = next(r for r in results if r.status == "failed")
    assert failed.error is not None and failed.error.error is not None
    assert failed.error.error.status == 400
    assert "line 2 is wrong" in failed.error.error.message
    assert api.cancelled == []
    assert sum(len(ids) for ids in api.submitted) == 3 + 2  # the other two, sent again once
