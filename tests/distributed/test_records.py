"""The results-file record of a distributed batch is the record of ``agentcore run``: the same
fields, the same output encoding (pydantic models included), the same error details.

Workers run in this process against a real server; the records of ``agentcore run`` are made
by the same batch on the same backend."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

import agentcore
from agentcore import ErrorKind, ModelError, Usage
from agentcore._cli.main import main as cli_main
from agentcore._tasks.results_file import ResultRecord
from agentcore.core import AssistantMessage, CallModel, ModelFailed, ModelResponded, UserMessage
from agentcore.wire import Exchange

pydantic = pytest.importorskip("pydantic")

_NUMBER = re.compile(r"number (\d+)")


class Verdict(pydantic.BaseModel):
    number: int
    label: str


class VerdictModel:
    """Answers agent ``n`` with a ``Verdict`` when ``n`` is even; an odd ``n`` asks for a
    model that does not exist (404, not retried)."""

    async def exchange(self, call: CallModel) -> Exchange:
        await trio.lowlevel.checkpoint()
        user = next(m for m in call.messages if isinstance(m, UserMessage))
        found = _NUMBER.search(user.content)
        assert found is not None
        n = int(found.group(1))
        if n % 2:
            error = ModelError(ErrorKind.NOT_FOUND, f"no model for {n}", status=404)
            return Exchange(ModelFailed(call.request_id, error))
        text = orjson.dumps({"number": n, "label": f"even {n}"}).decode()
        reply = AssistantMessage(content=text)
        return Exchange(ModelResponded(call.request_id, reply, Usage(12, 4, 3), "stop"))

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


TASK = agentcore.Task(prompt="Judge number {n}.", output=Verdict, max_turns=2, name="verdict")


def _lines(path: Path) -> dict[int, dict[str, Any]]:
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return {r["index"]: r for r in records}


async def _distributed(url: str, task: agentcore.Task, inputs: list[Any], out: Path, **kw: Any):
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: agentcore.run_worker(url, task, exit_when_done=True, block_ms=100, **kw)
        )
        await agentcore.submit_batch(url, task, inputs, out, block_ms=100)
    return _lines(out)


def _without_timing_values(record: dict[str, Any]) -> dict[str, Any]:
    timings = record["timings"]
    assert set(timings) == {"wall", "model_time", "tool_time", "slot_wait"}
    assert all(v is None or (isinstance(v, float) and v >= 0) for v in timings.values())
    return {k: v for k, v in record.items() if k != "timings"}


async def test_a_worker_finishes_agents_with_a_pydantic_output_and_writes_the_cli_record(
    redis_server, tmp_path
):
    inputs = [{"n": n} for n in range(6)]
    out = tmp_path / "out.jsonl"
    records = await _distributed(redis_server.url("pyd"), TASK, inputs, out, backend=VerdictModel())
    assert sorted(records) == list(range(6))
    for n in (0, 2, 4):
        assert records[n]["status"] == "ok"
        assert records[n]["output"] == {"number": n, "label": f"even {n}"}
    for n in (1, 3, 5):
        assert records[n]["status"] == "failed"
        assert records[n]["output"] is None
        assert records[n]["error"]["model_error"] == "not_found"
        assert records[n]["error"]["http_status"] == 404
    # The same batch on the same backend, in one process, as ``agentcore run`` records it.
    results = await agentcore.run_batch(TASK, inputs, backend=VerdictModel())
    for result in results:
        cli = orjson.loads(ResultRecord.of_result(result, result.index).encode())
        assert _without_timing_values(records[result.index]) == _without_timing_values(cli)


_VERDICTS = """
import pydantic


class Verdict(pydantic.BaseModel):
    number: int
    label: str


class Refused(pydantic.BaseModel):
    number: int
    label: str

    @pydantic.field_validator("label")
    @classmethod
    def never(cls, value: str) -> str:
        raise ValueError("no label is good enough")
"""


def test_the_cli_and_a_worker_write_the_same_records_on_the_simulated_backend(
    redis_server, tmp_path
):
    (tmp_path / "verdicts.py").write_text(_VERDICTS)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("".join(f'{{"n": {n}}}\n' for n in range(3)))
    given = [orjson.loads(line) for line in inputs.read_bytes().splitlines()]
    # ``Refused`` outputs never validate: with no repair turn, every agent fails.
    for output, status in (("Verdict", "ok"), ("Refused", "failed")):
        task_path = tmp_path / f"{output}.toml"
        task_path.write_text(
            f'prompt = "Judge number {{n}}."\noutput = "verdicts:{output}"\n'
            "max_turns = 1\nmax_output_retries = 0\n"
        )
        cli_out = tmp_path / f"{output}-cli.jsonl"
        code = cli_main(["run", str(task_path), str(inputs), "-o", str(cli_out), "-q"])
        assert code == (0 if status == "ok" else 1)
        task = agentcore.load_task(task_path)
        dist_out = tmp_path / f"{output}-dist.jsonl"
        url = redis_server.url(f"sim-{output}")
        dist = trio.run(lambda: _distributed(url, task, given, dist_out, backend="sim://"))  # noqa: B023
        cli = _lines(cli_out)
        assert sorted(dist) == sorted(cli) == [0, 1, 2]
        for index, record in cli.items():
            assert record["status"] == status
            assert list(dist[index]) == list(record)
            # Cached tokens depend on what the server's prefix cache held at the time.
            ours, theirs = dist[index]["usage"], record["usage"]
            assert isinstance(ours.pop("cached_tokens"), int)
            assert isinstance(theirs.pop("cached_tokens"), int)
            assert _without_timing_values(dist[index]) == _without_timing_values(record)
