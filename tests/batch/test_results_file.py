"""The one results-file record: its line, its reading of older files, and its documentation."""

from __future__ import annotations

import re
import subprocess
import typing
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

from agentcore import ErrorKind, ModelError, Usage
from agentcore._codecs.serde import dumps
from agentcore._core.events import AbortKind, AbortReason
from agentcore._core.messages import UserMessage
from agentcore._core.results import Result, RunTimings
from agentcore._tasks.results_file import ErrorRecord, RecordTimings, ResultRecord
from tests.batch.test_cli import _cli, _write_task

ROOT = Path(__file__).resolve().parents[2]

# Lines as the two writers wrote them before the record was one value (kept verbatim).
CLI_LINE = (
    b'{"index":1,"status":"failed","output":null,"error":{"kind":"model_failed","message":'
    b'"too big","model_error":"too_large","http_status":413},"turns":1,"usage":'
    b'{"prompt_tokens":20,"completion_tokens":0,"cached_tokens":null},"timings":{"wall":0.5,'
    b'"model_time":0.4,"tool_time":0.0,"slot_wait":0.1}}'
)
DISTRIBUTED_OK = (
    b'{"index":0,"status":"ok","output":{"total":3},"error":null,"turns":2,"usage":'
    b'{"prompt_tokens":20,"completion_tokens":10,"cached_tokens":0}}'
)
DISTRIBUTED_FAILED = (
    b'{"index":1,"status":"failed","output":null,"error":{"kind":"model_failed","message":'
    b'"The model does not exist"},"turns":1,"usage":{"prompt_tokens":0,"completion_tokens":0,'
    b'"cached_tokens":0}}'
)


def _result(error: AbortReason | None) -> Result[Any]:
    timings = RunTimings(10.0, 11.2345678, 0.75, 0.25, 0.125, (None,), 1)
    return Result(
        index=0,
        status="ok" if error is None else "failed",
        output={"answer": (1, 2)} if error is None else None,
        error=error,
        transcript=(UserMessage("hi"),),
        usage=Usage(20, 5, 4),
        timings=timings,
        turns=1,
    )


def test_a_record_of_a_result_encodes_its_fields_in_order_and_decodes_to_itself() -> None:
    record = ResultRecord.of_result(_result(None), 7)
    line = record.encode()
    value = orjson.loads(line)
    assert list(value) == ["index", "status", "output", "error", "turns", "usage", "timings"]
    assert value["index"] == 7 and value["output"] == {"answer": [1, 2]}
    assert value["timings"] == {
        "wall": 1.234568,
        "model_time": 0.75,
        "tool_time": 0.25,
        "slot_wait": 0.125,
    }
    assert ResultRecord.decode(line) == record
    with_transcript = ResultRecord.of_result(_result(None), 7, transcript=True)
    written = orjson.loads(with_transcript.encode())["transcript"]
    assert written == [orjson.loads(dumps(UserMessage("hi")))]
    assert ResultRecord.decode(with_transcript.encode()) == with_transcript


def test_a_failed_model_request_records_the_error_kind_and_http_status() -> None:
    cause = ModelError(ErrorKind.NOT_FOUND, "no such model", status=404)
    reason = AbortReason(AbortKind.MODEL_FAILED, "no such model", cause)
    value = orjson.loads(ResultRecord.of_result(_result(reason), 3).encode())
    assert value["status"] == "failed" and value["output"] is None
    assert value["error"] == {
        "kind": "model_failed",
        "message": "no such model",
        "model_error": "not_found",
        "http_status": 404,
    }
    budget = AbortReason(AbortKind.MAX_TURNS, "out of turns")
    value = orjson.loads(ResultRecord.of_result(_result(budget), 3).encode())
    assert value["error"]["model_error"] is None and value["error"]["http_status"] is None


def test_lines_written_before_the_one_record_are_read() -> None:
    cli = ResultRecord.decode(CLI_LINE)
    assert cli.error == ErrorRecord("model_failed", "too big", "too_large", 413)
    assert cli.timings == RecordTimings(0.5, 0.4, 0.0, 0.1)
    assert cli.encode() == CLI_LINE
    ok = ResultRecord.decode(DISTRIBUTED_OK)
    assert (ok.status, ok.output, ok.turns, ok.timings) == ("ok", {"total": 3}, 2, None)
    failed = ResultRecord.decode(DISTRIBUTED_FAILED)
    assert failed.error == ErrorRecord("model_failed", "The model does not exist", None, None)


@pytest.mark.parametrize(
    "line",
    [b"not json", b"[1]", b'{"status": "ok"}', b'{"index": 1, "status": "finished"}'],
)
def test_a_line_that_is_not_a_record_is_refused_with_a_value_error(line: bytes) -> None:
    with pytest.raises(ValueError, match="not a results-file record"):
        ResultRecord.decode(line)


def test_retry_failed_continues_a_file_written_by_a_distributed_batch_before(
    tmp_path: Path,
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_bytes(b'{"term": "a"}\n{"term": "b"}\n{"term": "c"}\n')
    out = tmp_path / "out.jsonl"
    out.write_bytes(DISTRIBUTED_OK + b"\n" + DISTRIBUTED_FAILED + b"\n")
    proc = subprocess.run(
        _cli("run", task, inputs, "-o", out, "-q", "--retry-failed"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "retrying 1 failed or cancelled inputs" in proc.stderr
    lines = out.read_bytes().splitlines()
    assert lines[0] == DISTRIBUTED_OK  # kept as it was
    records = {r.index: r for r in map(ResultRecord.decode, lines)}
    assert sorted(records) == [0, 1, 2] and len(lines) == 3
    assert all(r.status == "ok" and r.timings is not None for r in (records[1], records[2]))


# ----------------------------------------------------------------------------- the docs


def _documented_names(record: type) -> set[str]:
    """Every field of the record, nested objects as ``parent.child``."""
    names: set[str] = set()
    hints = typing.get_type_hints(record)
    for field in attrs.fields(record):
        names.add(field.name)
        inner = [t for t in typing.get_args(hints[field.name]) if t is not type(None)]
        kind = inner[0] if len(inner) == 1 else hints[field.name]
        if isinstance(kind, type) and attrs.has(kind):
            names |= {f"{field.name}.{child}" for child in _documented_names(kind)}
    return names


def test_docs_cli_lists_every_field_of_the_record_and_no_other() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text.split("### The results record", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([a-z_.]+)` \|", section, re.MULTILINE)
    assert len(rows) == len(set(rows))
    assert set(rows) == _documented_names(ResultRecord)
    # In the order the record writes them.
    top = [name for name in rows if "." not in name]
    assert top == [f.name for f in attrs.fields(ResultRecord)]


def test_docs_distributed_names_every_field_of_the_record_it_writes() -> None:
    text = (ROOT / "docs" / "distributed.md").read_text()
    paragraph = text.split("Each output line is the results record", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", paragraph))
    leaves = {name.rpartition(".")[2] for name in _documented_names(ResultRecord)}
    assert leaves - {"transcript"} <= named
