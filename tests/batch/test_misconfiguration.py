"""Misconfiguration is caught before any model time is spent: a driver without the task's
tools, a placeholder typo in the template, a backend that cannot serve the batch at all."""

from __future__ import annotations

import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio

import agentcore
from agentcore import BackendUnavailable, ConfigError, RenderError, RetryPolicy, Task
from agentcore._cli.main import main
from agentcore.testing import ScriptedModel
from tests.batch.test_cli import _cli, _write_inputs, _write_task


@agentcore.tool
def lookup(term: str) -> str:
    """Look a term up. Args: term: the term."""
    return term


@agentcore.tool
def search(query: str) -> str:
    """Search. Args: query: terms."""
    return query


async def test_a_driver_opened_without_the_tasks_tools_is_refused_naming_them(
    autojump_clock: object,
) -> None:
    task = Task(prompt="{input}", tools=[lookup, search])
    model = ScriptedModel(lambda call: "done")
    async with agentcore.open_driver(model, tools=[search]) as driver:
        with pytest.raises(
            ConfigError, match=r"without the task's tools: lookup \(it has: search\)"
        ):
            await agentcore.run_batch(task, ["a"], driver=driver)
        with pytest.raises(ConfigError, match="lookup"):
            await agentcore.map_reduce(plan=task, map=task, reduce=task, input="x", driver=driver)
    assert model.calls == []


async def test_a_driver_with_another_tool_of_the_same_name_is_refused(
    autojump_clock: object,
) -> None:
    @agentcore.tool(name="lookup")
    def other(term: str) -> str:
        """Another lookup. Args: term: the term."""
        return ""

    task = Task(prompt="{input}", tools=[lookup])
    async with agentcore.open_driver(ScriptedModel(lambda c: "x"), tools=[other]) as driver:
        with pytest.raises(ConfigError, match="another tool of that name"):
            await agentcore.run_batch(task, ["a"], driver=driver)


def test_check_input_names_the_missing_placeholders_and_the_keys_the_input_has() -> None:
    task = Task(prompt="Review {pth} ({size} bytes)")
    with pytest.raises(
        RenderError, match=r"placeholder \{pth\} is not in the input \(its keys: path, size\)"
    ):
        task.check_input({"path": "a.py", "size": 3})
    with pytest.raises(RenderError, match=r"placeholders \{pth\}, \{size\} are"):
        task.check_input({"path": "a.py"})
    with pytest.raises(RenderError, match=r"fills \{input\} only"):
        task.check_input("a.py")
    Task(prompt="Review {input}").check_input("a.py")
    Task(prompt="Review {path}").check_input({"path": "a.py", "extra": 1})


def test_the_cli_exits_2_on_a_placeholder_typo_naming_it_and_the_input_keys(
    tmp_path: Path,
) -> None:
    task = _write_task(tmp_path, 0.0)
    task.write_text(task.read_text().replace("Term: {term}", "Term: {trem}"))
    inputs = _write_inputs(tmp_path, 3)
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        _cli("run", task, inputs, "-o", out),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "{trem}" in proc.stderr
    assert "its keys: term" in proc.stderr
    assert not out.exists()


def test_a_placeholder_typo_is_reported_once_however_many_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = tmp_path / "task.toml"
    task.write_text('prompt = "Review {pth} ({size} bytes)"\n')
    inputs = tmp_path / "inputs.jsonl"
    lines = [orjson.dumps({"path": f"f{i}.py", "size": i}).decode() for i in range(50)]
    lines[7] = '{"path": "f7.py"}'  # also lacks {size}: a bad line of its own
    lines[9] = "{not json"
    inputs.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(["run", str(task), str(inputs), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[0] == (
        f"agentcore: error: the prompt template's placeholder {{pth}} is in no input of "
        f"{inputs} (the first input, line 1: its keys: path, size)"
    )
    assert [line.split(": ")[0] for line in err[1:]] == [f"{inputs}:8", f"{inputs}:10"]
    assert "{size}" in err[1]
    assert not out.exists()


@pytest.mark.parametrize("backend", ["vllm://127.0.0.1:9", "http://127.0.0.1:9/v1", "openai://"])
@pytest.mark.parametrize("command", ["run", "worker", "demo"])
def test_a_real_backend_without_model_exits_2_with_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    command: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    task = tmp_path / "task.toml"
    task.write_text('prompt = "Review {path}"\n')
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"path": "a.py"}\n')
    out = tmp_path / "out.jsonl"
    argv = {
        "run": ["run", str(task), str(inputs), "-o", str(out)],
        "worker": ["worker", str(task), "--queue", "redis://127.0.0.1:9/batch"],
        "demo": ["demo", "--agents", "1"],
    }[command]
    code = main([*argv, "--backend", backend])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.splitlines() == [
        f"agentcore: error: --model is required with --backend {backend}: the model name the "
        "server serves (only sim:// has a default)"
    ]
    assert not out.exists()


def test_sim_needs_no_model_and_answers_to_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = tmp_path / "task.toml"
    task.write_text('prompt = "Review {path}"\n')
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"path": "a.py"}\n')
    out = tmp_path / "out.jsonl"
    assert main(["run", str(task), str(inputs), "-o", str(out), "-q"]) == 0
    assert [orjson.loads(line)["status"] for line in out.read_bytes().splitlines()] == ["ok"]


async def test_a_refused_connection_at_warm_up_stops_the_batch_naming_url_and_model() -> None:
    with trio.socket.socket() as sock:  # a port nothing listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    task = Task(prompt="{input}")
    with pytest.raises(BackendUnavailable) as raised:
        await agentcore.run_batch(
            task,
            range(50),
            backend=f"vllm://127.0.0.1:{port}",
            model="my-model",
            retry=RetryPolicy(max_attempts=2, base_delay=0.01),
        )
    message = str(raised.value)
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in message
    assert "'my-model'" in message
    assert "no response, connection" in message
    assert raised.value.error.kind is agentcore.ErrorKind.CONNECTION


@pytest.fixture
def sim_server() -> Iterator[str]:
    """The project's simulated server on a free port of 127.0.0.1, stopped by pid."""
    code = (
        "from agentcore._sim import SimConfig, run_sim_server; "
        "run_sim_server('127.0.0.1', 0, SimConfig())"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(process.stdout, selectors.EVENT_READ)
                assert selector.select(30), "the simulated server printed nothing"
            line = process.stdout.readline().decode()
            yield line.split("serving ", 1)[1].split()[0].removeprefix("http://").split("/")[0]
        finally:
            process.kill()
            process.wait(timeout=30)


def test_the_cli_exits_2_with_one_line_when_the_warm_up_hits_no_route(
    tmp_path: Path, sim_server: str
) -> None:
    task = _write_task(tmp_path, 0.0)
    inputs = _write_inputs(tmp_path, 20)
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        _cli(
            "run",
            task,
            inputs,
            "-o",
            out,
            "--backend",
            f"vllm://{sim_server}/wrong",
            "--model",
            "sim",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"http://{sim_server}/wrong/chat/completions" in lines[0]
    assert "(model 'sim')" in lines[0]
    assert "HTTP 404" in lines[0]
    assert not any(orjson.loads(line) for line in out.read_bytes().splitlines())
