"""A batch resumed from its step journal runs with the padding its first run measured: every
request of the resumed run, a restored agent's and a fresh one's, carries the killed run's
system prompt to the byte, so a restored agent's next request is the one it would have sent
(and the engine's cached blocks of its earlier turns still match), even when only part of
the inputs runs again and that part, sampled on its own, would share a longer prefix."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import agentcore
from agentcore import JournalError
from agentcore._tasks.fingerprint import task_description
from agentcore._tasks.journal import open_step_journal
from tests.batch.scripted_tokenizer import TASK, Summary, papers
from tests.batch.test_prefix_alignment_engine import Engine
from tests.driver.openai_server import Reply, open_openai_server

INPUTS = papers(40)
STOPPED = range(30, 40)
"""The inputs whose final answer the first run never gets."""


@attrs.define
class Stalling(Engine):
    """The engine of the alignment tests, which never answers the final request of the
    agents in :data:`STOPPED` while ``stall`` is set, and says when all of them have asked."""

    block: int = 64
    stall: bool = True
    asked: trio.Event = attrs.field(factory=trio.Event)
    waiting: set[int] = attrs.field(factory=set)

    def chat(self, body: dict[str, Any], n: int) -> Reply:
        user = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")
        stalled = next((i for i in STOPPED if INPUTS[i]["paper"] in user), None)
        final = body.get("tool_choice") != "required" and body.get("max_tokens") != 1
        if self.stall and stalled is not None and final:
            self.waiting.add(stalled)
            if len(self.waiting) == len(STOPPED):
                self.asked.set()
            return Reply(delay=10_000.0)  # answered by no one: the run is stopped first
        return super().chat(body, n)


async def run(
    engine: Stalling, path: Path, inputs: list[Any], indices: list[int] | None, **options: Any
) -> tuple[list[agentcore.Result[Summary]], Any, Any]:
    """The batch over ``inputs`` on ``engine`` with the journal at ``path``, stopped (while
    ``engine.stall``) once the others have finished and the stalled agents have all asked for
    their final answer: the results, the alignment report and the server."""
    description = task_description(TASK)
    results: list[agentcore.Result[Summary]] = []
    async with (
        open_openai_server(engine.chat, engine.routes()) as server,
        open_step_journal(path, description, new_batch_id="b") as journal,
        agentcore.open_batch(
            TASK,
            inputs,
            backend=server.url,
            dialect="vllm",
            model="m",
            step_journal=journal,
            indices=indices,
            **options,
        ) as stream,
    ):
        async for result in stream:
            results.append(result)
            if engine.stall and sum(r.status == "ok" for r in results) == len(INPUTS) - len(
                STOPPED
            ):
                await engine.asked.wait()
                stream.cancel()
    assert stream.warm_up is not None
    return results, stream.warm_up.alignment, server


def system_prompts(server: Any) -> set[str]:
    """The system prompts of the batch's chat requests (the check request has none)."""
    return {b["messages"][0]["content"] for b in server.requests if b.get("max_tokens") != 1}


async def test_a_resumed_batch_sends_the_padded_prefix_of_the_run_it_resumes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "batch.journal"
    engine = Stalling()
    first, alignment, server = await run(engine, path, INPUTS, None)
    assert alignment is not None and alignment.aligned and alignment.padding
    assert {r.index for r in first if r.status == "ok"} == set(range(30))
    assert {r.index for r in first if r.status == "cancelled"} == set(STOPPED)
    (padded,) = system_prompts(server)
    assert padded == TASK.system + alignment.padding

    # The rest of the batch, as `agentcore run --resume` runs it: the unfinished inputs with
    # their indices. Sampled alone they share one more token than the whole list did.
    engine.stall = False
    rest = list(STOPPED)
    again, restored, server = await run(engine, path, [INPUTS[i] for i in rest], rest)
    assert sorted(r.index for r in again if r.status == "ok") == rest
    assert all(r.output == Summary("a summary") for r in again)
    assert system_prompts(server) == {padded}
    # Every restored agent asked again for exactly the answer it was waiting for, and the
    # engine was asked nothing to align.
    assert len([b for b in server.requests if b.get("max_tokens") != 1]) == len(rest)
    assert server.routed == []
    assert restored == attrs.evolve(alignment, requests=0, seconds=0.0, journaled=True)


async def test_a_batch_that_did_not_pad_resumes_unpadded(tmp_path: Path) -> None:
    path = tmp_path / "batch.journal"
    engine = Stalling()
    _, alignment, server = await run(engine, path, INPUTS, None, align_prefix=False)
    assert alignment is None and system_prompts(server) == {TASK.system}
    engine.stall = False
    rest = list(STOPPED)
    again, restored, server = await run(engine, path, [INPUTS[i] for i in rest], rest)
    assert sorted(r.index for r in again if r.status == "ok") == rest
    assert restored is None and server.routed == []
    assert system_prompts(server) == {TASK.system}


async def test_an_unreadable_alignment_record_is_a_journal_error_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "batch.journal"
    await run(Stalling(stall=False), path, INPUTS, None)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = 'x' WHERE key LIKE 'setting:%'")
    conn.close()
    with pytest.raises(JournalError, match="prefix alignment is unreadable"):
        async with agentcore.open_batch(
            TASK, INPUTS, backend="vllm://127.0.0.1:9", model="m", step_journal=path
        ):
            pass
