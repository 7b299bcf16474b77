"""The simulator's Batch APIs as the official clients see them: every status and answer the
simulator plays, driven through the ``openai`` and ``anthropic`` SDKs against ``agentcore
sim`` and parsed with the SDKs' own types (validated, not just constructed), so the simulator
cannot drift from what the SDKs parse.

OpenAI: ``validating``, ``in_progress``, ``finalizing``, ``completed`` (output and error files,
line-level statuses, usage), ``expired`` (``batch_expired`` lines), ``cancelling`` and
``cancelled`` (``batch_cancelled`` lines), ``failed`` (``errors.data``: too many requests, one
model per file), a refused key, a batch not found, a file deleted, the listing. Anthropic:
``in_progress``, ``canceling``, ``ended``; ``succeeded``, ``errored``, ``expired`` and
``canceled`` results; results past their retention (404); a batch too large (413); a refused
key; a batch deleted.

The SDKs live in their own environment (``tools/sdks/setup.sh`` makes it in
``~/.cache/agentcore-sdks``); without it the test is skipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.sim_process import sim_process

SDKS = Path(os.environ.get("AGENTCORE_SDKS", Path.home() / ".cache" / "agentcore-sdks"))
PYTHON = SDKS / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not PYTHON.exists(), reason=f"no SDK environment at {SDKS} (run tools/sdks/setup.sh)"
)

# Simulated seconds run 20 times faster: a batch lasts 60 s (3 s), its window 80 s (4 s), a
# cancel a minute (3 s); the second batch created expires.
TIMING = ("--speedup", "20", "--batch-delay", "60", "--batch-window", "80", "--batch-expire", "2",
          "--batch-fail-rate", "0.4", "--seed", "3")  # fmt: skip

OPENAI_SCRIPT = """
import json, sys, time
import openai
from openai.types import Batch, FileDeleted, FileObject

client = openai.OpenAI(base_url=sys.argv[1], api_key="sk-sim", max_retries=0)

def lines(n, models=("m",)):
    return "".join(
        json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
                    "body": {"model": models[i % len(models)],
                             "messages": [{"role": "user", "content": f"say {i}"}]}}) + "\\n"
        for i in range(n)).encode()

def create(data):
    raw = client.files.with_raw_response.create(file=("in.jsonl", data), purpose="batch")
    uploaded = FileObject.model_validate(raw.http_response.json())
    return client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                 completion_window="24h", metadata={"agentcore_hop": "t-1"})

def watch(batch_id, until, first=None):
    seen = [] if first is None else [first]
    while True:
        raw = client.batches.with_raw_response.retrieve(batch_id)
        batch = Batch.model_validate(raw.http_response.json())
        if not seen or seen[-1] != batch.status:
            seen.append(batch.status)
        if batch.status in until:
            return batch, seen
        time.sleep(0.01)

def read(file_id):
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]

def statuses(batch):
    found = []
    for file_id in (batch.output_file_id, batch.error_file_id):
        for line in read(file_id) if file_id else []:
            found.append(line["response"]["status_code"] if line["response"]
                         else line["error"]["code"])
    return sorted(map(str, found))

out = {}
created = create(lines(5))  # the creation's answer says the first status, validating
batch, seen = watch(created.id, ("completed",), created.status)
out["completed"] = {"seen": seen, "counts": batch.request_counts.model_dump(),
                    "usage": batch.usage.input_tokens > 0, "lines": statuses(batch),
                    "finalized": batch.finalizing_at is not None}
batch, seen = watch(create(lines(6)).id, ("expired",))
out["expired"] = {"seen": seen, "counts": batch.request_counts.model_dump(),
                  "lines": statuses(batch)}
third = create(lines(4))
cancelling = client.batches.cancel(third.id)
batch, seen = watch(third.id, ("cancelled",))
out["cancelled"] = {"first": cancelling.status, "seen": seen, "lines": statuses(batch)}
batch, seen = watch(create(lines(7)).id, ("failed",))
out["too_many"] = {"seen": seen, "errors": [(e.code, e.line) for e in batch.errors.data]}
batch, seen = watch(create(lines(3, ("m", "n"))).id, ("failed",))
out["two_models"] = {"errors": [(e.code, e.line, e.param) for e in batch.errors.data]}
try:
    openai.OpenAI(base_url=sys.argv[1], api_key="sk-wrong", max_retries=0).batches.list()
except openai.AuthenticationError as exc:
    out["auth"] = [exc.status_code, exc.code]
try:
    client.batches.retrieve("batch_unknown")
except openai.NotFoundError as exc:
    out["not_found"] = exc.status_code
deleted = client.files.with_raw_response.delete(batch.input_file_id)
out["deleted"] = FileDeleted.model_validate(deleted.http_response.json()).deleted
out["listed"] = len(client.batches.list().data)
print(json.dumps(out))
"""

ANTHROPIC_SCRIPT = """
import json, sys, time
import anthropic
from anthropic.types.messages import (
    DeletedMessageBatch, MessageBatch, MessageBatchIndividualResponse)

client = anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-ant-sim", max_retries=0)

def requests(n, tools=False):
    made = [{"custom_id": f"req-{i}", "params": {"model": "m", "max_tokens": 200,
             "messages": [{"role": "user", "content": f"say {i}"}]}} for i in range(n)]
    if tools:
        made.append({"custom_id": "tools", "params": {
            "model": "m", "max_tokens": 200,
            "messages": [{"role": "user", "content": "look up x"}],
            "tools": [{"name": "lookup", "description": "Look up.", "input_schema": {
                "type": "object", "properties": {"term": {"type": "string"}},
                "required": ["term"]}}],
            "tool_choice": {"type": "any"}}})
    return made

def watch(batch_id, until):
    seen = []
    while True:
        raw = client.messages.batches.with_raw_response.retrieve(batch_id)
        batch = MessageBatch.model_validate(raw.http_response.json())
        if not seen or seen[-1] != batch.processing_status:
            seen.append(batch.processing_status)
        if batch.processing_status == until:
            return batch, seen
        time.sleep(0.01)

def results(batch_id):
    found = []
    for entry in client.messages.batches.results(batch_id):
        entry = MessageBatchIndividualResponse.model_validate(entry.model_dump())
        result = entry.result
        found.append(result.type if result.type != "errored" else result.error.error.type)
        if result.type == "succeeded":
            assert result.message.usage.service_tier == "batch"
    return sorted(found)

out = {}
first = client.messages.batches.create(requests=requests(5, tools=True))
batch, seen = watch(first.id, "ended")
out["ended"] = {"seen": seen, "counts": batch.request_counts.model_dump(),
                "results": results(batch.id)}
second = client.messages.batches.create(requests=requests(6))
batch, seen = watch(second.id, "ended")
out["expired"] = {"counts": batch.request_counts.model_dump(), "results": results(batch.id)}
third = client.messages.batches.create(requests=requests(4))
canceling = client.messages.batches.cancel(third.id)
batch, seen = watch(third.id, "ended")
out["canceled"] = {"first": canceling.processing_status, "seen": seen,
                   "counts": batch.request_counts.model_dump()}
try:
    client.messages.batches.create(requests=requests(200))
except anthropic.APIStatusError as exc:
    out["too_large"] = [exc.status_code, exc.body["error"]["type"]]
while True:  # the first batch's results are kept 29 days: 160 simulated seconds here
    try:
        client.messages.batches.results(first.id)
    except anthropic.NotFoundError as exc:
        out["retention"] = exc.status_code
        break
    time.sleep(0.2)
deleted = client.messages.batches.with_raw_response.delete(first.id)
out["deleted"] = DeletedMessageBatch.model_validate(deleted.http_response.json()).type
try:
    anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-wrong",
                        max_retries=0).messages.batches.list()
except anthropic.AuthenticationError as exc:
    out["auth"] = [exc.status_code, exc.body["error"]["type"]]
out["listed"] = len(client.messages.batches.list().data)
print(json.dumps(out))
"""


def _sdk(script: str, url: str) -> dict[str, object]:
    done = subprocess.run(
        [str(PYTHON), "-c", script, url], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = orjson.loads(done.stdout)
    return result


def test_the_openai_sdk_reads_every_status_and_answer_of_the_simulator() -> None:
    flags = (*TIMING, "--batch-max-requests", "6", "--api-keys", "sk-sim")
    with sim_process(*flags) as url:
        seen = _sdk(OPENAI_SCRIPT, url)
    completed = seen["completed"]
    seen_statuses: list[str] = completed["seen"]  # type: ignore[index]
    lifecycle = ["validating", "in_progress", "finalizing", "completed"]
    assert seen_statuses == [s for s in lifecycle if s in seen_statuses]  # in order
    assert seen_statuses[:2] == ["validating", "in_progress"] and seen_statuses[-1] == "completed"
    # Finalizing lasts the last 2 % of the batch (60 ms here): a poll slowed by a busy machine
    # may miss it; the batch then still says when it finalized. (Validating, the first 2 %, is
    # what the creation answered.)
    assert "finalizing" in seen_statuses or completed["finalized"]  # type: ignore[index]
    assert completed["counts"]["total"] == 5  # type: ignore[index]
    assert completed["usage"] is True  # type: ignore[index]
    lines = completed["lines"]  # type: ignore[index]
    assert len(lines) == 5 and "200" in lines and set(lines) - {"200"}  # some lines failed
    expired = seen["expired"]
    assert expired["seen"][-1] == "expired"  # type: ignore[index]
    assert expired["lines"].count("batch_expired") == 3  # type: ignore[index]
    cancelled = seen["cancelled"]
    assert cancelled["first"] == "cancelling"  # type: ignore[index]
    assert cancelled["seen"][-2:] == ["cancelling", "cancelled"]  # type: ignore[index]
    assert "batch_cancelled" in cancelled["lines"]  # type: ignore[index]
    assert seen["too_many"] == {
        "seen": ["validating", "failed"],
        "errors": [["too_many_tasks", None]],
    }
    assert seen["two_models"] == {"errors": [["model_mismatch", 2, "model"]]}
    assert seen["auth"] == [401, "invalid_api_key"]
    assert seen["not_found"] == 404
    assert seen["deleted"] is True
    assert seen["listed"] == 5


def test_the_anthropic_sdk_reads_every_status_and_result_of_the_simulator() -> None:
    flags = (*TIMING, "--batch-retention", "160", "--batch-max-bytes", "20000",
             "--api-keys", "sk-ant-sim")  # fmt: skip
    with sim_process(*flags) as url:
        seen = _sdk(ANTHROPIC_SCRIPT, url.removesuffix("/v1"))
    ended = seen["ended"]
    assert ended["seen"] == ["in_progress", "ended"]  # type: ignore[index]
    assert ended["counts"]["processing"] == 0  # type: ignore[index]
    results = ended["results"]  # type: ignore[index]
    assert len(results) == 6 and "succeeded" in results and set(results) - {"succeeded"}
    expired = seen["expired"]
    assert expired["counts"]["expired"] == 3  # type: ignore[index]
    assert expired["results"].count("expired") == 3  # type: ignore[index]
    canceled = seen["canceled"]
    assert canceled["first"] == "canceling"  # type: ignore[index]
    assert canceled["seen"] == ["canceling", "ended"]  # type: ignore[index]
    assert canceled["counts"]["canceled"] > 0  # type: ignore[index]
    assert seen["too_large"] == [413, "request_too_large"]
    assert seen["retention"] == 404
    assert seen["deleted"] == "message_batch_deleted"
    assert seen["auth"] == [401, "authentication_error"]
    assert seen["listed"] == 2  # the first was deleted
