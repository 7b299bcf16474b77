"""No public entry point lets the library's own nurseries leak an exception group: an error
raised while opening (a ConfigError) and the caller's own exception raised inside the block
come out as themselves, so ``except agentcore.ConfigError`` catches them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import agentcore
from agentcore import Agent, ConfigError, Task
from agentcore._cli.main import main
from agentcore.sim import open_sim_server

BAD_KEY = "k\x01ey"  # a control character cannot be sent in a header: a ConfigError
TASK = Task(prompt="Say something about {topic}")
INPUTS = [{"topic": "owls"}]


class Boom(Exception):
    """The caller's own exception."""


async def _open_driver_bad_key() -> None:
    async with agentcore.open_driver("sim://", api_key=BAD_KEY):
        pass


async def _open_driver_bad_transport() -> None:
    async with agentcore.open_driver("sim://", transport="carrier-pigeon"):
        pass


async def _run_batch_bad_key() -> None:
    await agentcore.run_batch(TASK, INPUTS, backend="sim://", api_key=BAD_KEY)


async def _open_batch_bad_key() -> None:
    async with agentcore.open_batch(TASK, INPUTS, backend="sim://", api_key=BAD_KEY):
        pass


async def _map_reduce_bad_key() -> None:
    await agentcore.map_reduce(
        plan=Task(prompt="List topics about {input}", output=list[str]),
        map=Task(prompt="{input}"),
        reduce=Task(prompt="{answers}"),
        input="birds",
        backend="sim://",
        api_key=BAD_KEY,
    )


async def _configured_sim_bad_fallback_key() -> None:
    fallback = agentcore.Fallback("sim://", api_key=BAD_KEY)
    async with agentcore.open_driver("sim://", fallback=[fallback]):
        pass


OPENING = {
    "open_driver, bad api_key": _open_driver_bad_key,
    "open_driver, bad transport": _open_driver_bad_transport,
    "run_batch": _run_batch_bad_key,
    "open_batch": _open_batch_bad_key,
    "map_reduce": _map_reduce_bad_key,
    "a fallback's bad api_key": _configured_sim_bad_fallback_key,
}


@pytest.mark.parametrize("entry", list(OPENING))
async def test_a_config_error_while_opening_is_raised_as_itself(entry: str) -> None:
    opening: Callable[[], Awaitable[None]] = OPENING[entry]
    with pytest.raises(ConfigError):
        await opening()


async def test_the_callers_exception_leaves_open_driver_as_itself() -> None:
    with pytest.raises(Boom):
        async with agentcore.open_driver("sim://"):
            raise Boom


async def test_the_callers_exception_leaves_open_batch_as_itself() -> None:
    with pytest.raises(Boom):
        async with agentcore.open_batch(TASK, INPUTS, backend="sim://"):
            raise Boom


async def test_the_callers_exception_leaves_a_watched_agent_as_itself() -> None:
    async with agentcore.open_driver("sim://") as driver:
        with pytest.raises(Boom):
            async with Agent().watch("hello", driver=driver):
                raise Boom


async def test_a_config_error_from_agent_run_is_raised_as_itself() -> None:
    async with agentcore.open_driver("sim://") as driver:
        with pytest.raises(ConfigError):
            await Agent().run(42, driver=driver)  # type: ignore[arg-type]


async def test_the_simulator_server_raises_the_callers_exception_as_itself() -> None:
    with pytest.raises(Boom):
        async with open_sim_server(port=0):
            raise Boom


async def test_the_simulator_server_raises_a_failure_to_listen_as_itself() -> None:
    async with open_sim_server(port=0) as taken:
        with pytest.raises(OSError):
            async with open_sim_server(port=taken.port):
                pass


def test_the_cli_reports_a_config_error_while_opening_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    task = tmp_path / "task.toml"
    task.write_text('name = "t"\nprompt = "Say something about {topic}"\n')
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"topic": "owls"}\n')
    monkeypatch.setenv("AGENTCORE_TEST_BAD_KEY", BAD_KEY)
    out = tmp_path / "out.jsonl"
    argv = ["run", str(task), str(inputs), "-o", str(out), "--api-key-env"]
    code = main([*argv, "AGENTCORE_TEST_BAD_KEY", "--backend", "sim://", "--model", "sim"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "control character" in err and "Traceback" not in err
