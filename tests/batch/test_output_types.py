"""Output types beyond attrs classes: dataclasses and TypedDict (through cattrs), and pydantic
models (pydantic's own schema and validation), end to end on the simulated backend."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import orjson
import pytest
import trio

import agentcore
from agentcore._codecs.values import json_value
from agentcore._core.schema import ValidationFailed, json_schema, structure


@dataclasses.dataclass(frozen=True)
class Finding:
    title: str
    score: int
    tags: list[str] = dataclasses.field(default_factory=list)


class Row(TypedDict):
    name: str
    count: int
    note: NotRequired[str]


def test_a_dataclass_output_has_a_strict_object_schema_and_structures_to_an_instance() -> None:
    schema = json_schema(Finding)
    assert schema["required"] == ["title", "score"]
    assert schema["additionalProperties"] is False
    assert structure({"title": "t", "score": 2}, Finding) == Finding("t", 2, [])
    with pytest.raises(ValidationFailed, match=r"expected int, got string .* @ \$\.score"):
        structure({"title": "t", "score": "2"}, Finding)
    with pytest.raises(ValidationFailed, match="extra fields found"):
        structure({"title": "t", "score": 2, "x": 1}, Finding)


def test_a_typeddict_output_lists_required_keys_and_structures_to_a_dict() -> None:
    schema = json_schema(Row)
    assert schema["required"] == ["name", "count"]
    assert set(schema["properties"]) == {"name", "count", "note"}
    assert structure({"name": "a", "count": 1}, Row) == {"name": "a", "count": 1}
    with pytest.raises(ValidationFailed, match=r"@ \$\.count"):
        structure({"name": "a", "count": True}, Row)
    with pytest.raises(ValidationFailed, match=r"required field missing @ \$\.count"):
        structure({"name": "a"}, Row)
    with pytest.raises(ValidationFailed, match=r"extra fields found \(x\)"):
        structure({"name": "a", "count": 1, "x": 0}, Row)


def _run(task: agentcore.Task[Any], n: int = 3) -> list[agentcore.Result[Any]]:
    async def main() -> list[agentcore.Result[Any]]:
        return await agentcore.run_batch(
            task, [{"topic": f"t{i}"} for i in range(n)], backend="sim://", model="sim"
        )

    return trio.run(main)


@pytest.mark.parametrize(("output", "kind"), [(Finding, Finding), (Row, dict), (list[Row], list)])
def test_a_batch_returns_instances_of_dataclass_and_typeddict_outputs(
    output: Any, kind: type
) -> None:
    results = _run(agentcore.Task(prompt="Assess {topic}", output=output, max_turns=1))
    assert [r.status for r in results] == ["ok"] * 3, results
    assert all(isinstance(r.output, kind) for r in results)


try:
    import pydantic
except ImportError:  # pragma: no cover - the dev extra installs it
    pydantic = None


def _pydantic_models() -> tuple[Any, Any, Any]:
    if pydantic is None:  # pragma: no cover
        pytest.skip("pydantic is not installed (pip install pydantic)")

    class Source(pydantic.BaseModel):
        url: str

    class Summary(pydantic.BaseModel):
        text: str = pydantic.Field(description="two sentences")
        sources: list[Source]

    class Query(pydantic.BaseModel):
        text: str
        limit: int = 3

    # Local classes: their annotations resolve in the module namespace (future annotations).
    globals().update(Source=Source, Summary=Summary, Query=Query)
    Summary.model_rebuild()
    return Source, Summary, Query


def test_a_pydantic_model_output_uses_pydantic_schema_and_validation() -> None:
    _, Summary, _ = _pydantic_models()

    schema = json_schema(Summary)
    assert schema["properties"]["text"]["description"] == "two sentences"
    assert "$defs" not in schema  # nested models are inlined, so the schema nests anywhere
    assert schema["properties"]["sources"]["items"]["properties"] == {
        "url": {"title": "Url", "type": "string"}
    }
    value = structure({"text": "x", "sources": [{"url": "u"}]}, Summary)
    assert isinstance(value, Summary)
    assert value.sources[0].url == "u"
    with pytest.raises(ValidationFailed, match=r"sources\.0\.url: Field required"):
        structure({"text": "x", "sources": [{}]}, Summary)

    results = _run(agentcore.Task(prompt="Summarise {topic}", output=Summary, max_turns=1))
    assert [r.status for r in results] == ["ok"] * 3, results
    assert all(isinstance(r.output, Summary) for r in results)
    # What the CLI writes for an output: pydantic's own JSON form.
    assert json_value(value) == {"text": "x", "sources": [{"url": "u"}]}


def test_a_pydantic_model_as_a_tool_parameter_is_validated_by_pydantic() -> None:
    _, _, Query = _pydantic_models()

    @agentcore.tool
    def search(query: Query) -> list[str]:
        """Search. Args: query: what to look for."""
        return [query.text] * query.limit

    assert search.spec.parameters["properties"]["query"]["required"] == ["text"]
    arguments = search.spec.validator({"query": {"text": "a", "limit": 2}})
    assert isinstance(arguments.query, Query)
    with pytest.raises(ValidationFailed):
        search.spec.validator({"query": {"limit": 2}})


_MODELS = """
import dataclasses
from typing import TypedDict
import pydantic

@dataclasses.dataclass
class Shape:
    name: str
    sides: int

class Row(TypedDict):
    name: str
    sides: int

class Model(pydantic.BaseModel):
    name: str
    sides: int
"""


@pytest.mark.parametrize("output", ["Shape", "Row", "Model"])
def test_the_cli_writes_dataclass_typeddict_and_pydantic_outputs_as_json(
    tmp_path: Path, output: str
) -> None:
    if pydantic is None:  # pragma: no cover
        pytest.skip("pydantic is not installed (pip install pydantic)")
    (tmp_path / "shapes.py").write_text(_MODELS)
    task = tmp_path / "task.toml"
    task.write_text(f'prompt = "Describe {{input}}"\noutput = "shapes:{output}"\nmax_turns = 1\n')
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('"triangle"\n"square"\n')
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentcore._cli.main",
            "run",
            str(task),
            str(inputs),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for line in out.read_bytes().splitlines():
        record = orjson.loads(line)
        assert record["status"] == "ok"
        assert set(record["output"]) == {"name", "sides"}
        assert isinstance(record["output"]["sides"], int)
