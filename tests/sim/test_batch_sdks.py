"""The simulator's Batch APIs as the official clients see them: the ``openai`` SDK's
``files.create`` / ``batches.create`` / ``batches.retrieve`` / ``files.content`` /
``batches.cancel`` and the ``anthropic`` SDK's ``messages.batches.create`` / ``retrieve`` /
``results`` / ``cancel`` against ``agentcore sim``.

The SDKs live in their own environment (``tools/sdks/setup.sh`` makes it in
``~/.cache/agentcore-sdks``); without it the test is skipped.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.sim_process import sim_process

SDKS = Path(os.environ.get("AGENTCORE_SDKS", Path.home() / ".cache" / "agentcore-sdks"))
PYTHON = SDKS / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not PYTHON.exists(), reason=f"no SDK environment at {SDKS} (run tools/sdks/setup.sh)"
)

OPENAI_SCRIPT = """
import json, sys, time
import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="sk-sim")
lines = [
    {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
     "body": {"model": "m", "messages": [{"role": "user", "content": f"say {i}"}]}}
    for i in range(3)
]
data = "".join(json.dumps(line) + "\\n" for line in lines).encode()
uploaded = client.files.create(file=("in.jsonl", data), purpose="batch")
batch = client.batches.create(
    input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h",
    metadata={"hop": "1"},
)
first = batch.status
while batch.status not in ("completed", "failed", "expired", "cancelled"):
    time.sleep(0.05)
    batch = client.batches.retrieve(batch.id)
out = client.files.content(batch.output_file_id).text
answers = {}
for raw in out.splitlines():
    line = json.loads(raw)
    answers[line["custom_id"]] = line["response"]["body"]["choices"][0]["message"]["content"]
other = client.batches.create(
    input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
)
cancelled = client.batches.cancel(other.id)
listed = [b.id for b in client.batches.list()]
print(json.dumps({
    "first": first, "status": batch.status, "counts": batch.request_counts.model_dump(),
    "answers": answers, "file_bytes": uploaded.bytes, "cancelled": cancelled.status,
    "listed": listed, "ids": [batch.id, other.id],
}))
"""

ANTHROPIC_SCRIPT = """
import json, sys, time
import anthropic

client = anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-ant-sim")
requests = [
    {"custom_id": f"req-{i}", "params": {"model": "m", "max_tokens": 200,
     "messages": [{"role": "user", "content": f"say {i}"}]}}
    for i in range(3)
]
requests.append({"custom_id": "tools", "params": {
    "model": "m", "max_tokens": 200, "messages": [{"role": "user", "content": "look up x"}],
    "tools": [{"name": "lookup", "description": "Look up.", "input_schema": {
        "type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"]}}],
    "tool_choice": {"type": "any"}}})
batch = client.messages.batches.create(requests=requests)
first = batch.processing_status
while batch.processing_status != "ended":
    time.sleep(0.05)
    batch = client.messages.batches.retrieve(batch.id)
results = {}
for entry in client.messages.batches.results(batch.id):
    message = entry.result.message
    results[entry.custom_id] = [entry.result.type, message.stop_reason,
                                [block.type for block in message.content]]
other = client.messages.batches.create(requests=requests[:1])
cancelled = client.messages.batches.cancel(other.id)
print(json.dumps({
    "first": first, "status": batch.processing_status,
    "counts": batch.request_counts.model_dump(), "results": results,
    "cancelled": cancelled.processing_status, "results_url": batch.results_url,
}))
"""


@pytest.fixture
def sim_url() -> Iterator[str]:
    with sim_process("--batch-delay", "0.2") as url:
        yield url


def _sdk(script: str, url: str) -> dict[str, object]:
    done = subprocess.run(
        [str(PYTHON), "-c", script, url], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = orjson.loads(done.stdout)
    return result


def test_the_openai_sdk_runs_a_batch_against_the_simulator(sim_url: str) -> None:
    seen = _sdk(OPENAI_SCRIPT, sim_url)
    assert seen["first"] == "validating"
    assert seen["status"] == "completed"
    assert seen["counts"] == {"total": 3, "completed": 3, "failed": 0}
    answers = seen["answers"]
    assert isinstance(answers, dict)
    assert sorted(answers) == ["req-0", "req-1", "req-2"]
    assert all(isinstance(text, str) and text for text in answers.values())
    assert seen["cancelled"] == "cancelling"
    assert seen["listed"] == list(reversed(seen["ids"]))  # type: ignore[call-overload]


def test_the_anthropic_sdk_runs_a_message_batch_against_the_simulator(sim_url: str) -> None:
    seen = _sdk(ANTHROPIC_SCRIPT, sim_url.removesuffix("/v1"))
    assert seen["first"] == "in_progress"
    assert seen["status"] == "ended"
    assert seen["counts"] == {
        "processing": 0, "succeeded": 4, "errored": 0, "canceled": 0, "expired": 0,
    }  # fmt: skip
    results = seen["results"]
    assert isinstance(results, dict)
    assert results["req-0"] == ["succeeded", "end_turn", ["text"]]
    assert results["tools"] == ["succeeded", "tool_use", ["tool_use"]]
    assert seen["cancelled"] == "canceling"
