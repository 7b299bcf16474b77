"""``agentcore run``'s backend flags configure the backend exactly as the driver will."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentcore._cli.main as cli
from agentcore import wire
from agentcore.core import CallModel, UserMessage

TASK_FILE = 'prompt = "Say {word}."\n'


class Reached(Exception):
    """Raised where the batch would start: everything before it was accepted."""


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str) -> dict[str, Any]:
    """Run ``agentcore run`` with ``flags`` up to the start of its batch; what it would open
    the driver with."""
    (tmp_path / "task.toml").write_text(TASK_FILE)
    (tmp_path / "inputs.jsonl").write_text('{"word": "hi"}\n')
    seen: dict[str, Any] = {}

    async def execute(*args: Any, **keywords: Any) -> Any:
        seen.update(keywords)
        raise Reached

    monkeypatch.setattr(cli, "_execute", execute)
    argv = ["run", str(tmp_path / "task.toml"), str(tmp_path / "inputs.jsonl"), "-q",
            "-o", str(tmp_path / "out.jsonl"), *flags]  # fmt: skip
    with pytest.raises(Reached):
        cli.main(argv)
    return seen


@pytest.mark.parametrize(
    ("scheme", "environment", "header"),
    [("openai://", "OPENAI_API_KEY", "authorization"),
     ("anthropic://", "ANTHROPIC_API_KEY", "x-api-key")],
)  # fmt: skip
def test_the_key_named_by_api_key_env_configures_a_hosted_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str, environment: str, header: str
) -> None:
    monkeypatch.delenv(environment, raising=False)
    monkeypatch.setenv("FAKEKEY", "sk-from-the-flag")
    seen = _run(tmp_path, monkeypatch, "--backend", scheme, "--model", "m",
                "--api-key-env", "FAKEKEY")  # fmt: skip
    options = seen["driver_options"]
    assert options["api_key"] == "sk-from-the-flag"
    configured = wire.backend(seen["backend"], model=seen["model"], api_key=options["api_key"])
    request = configured.codec.encode(CallModel("r", (UserMessage("hi"),)))
    assert "sk-from-the-flag" in dict(request.headers)[header]


def test_a_service_tier_flag_is_the_backends_and_prices_are_the_drivers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"m": {"flex": {"input": 1.0, "output": 2.0}}}')
    seen = _run(tmp_path, monkeypatch, "--backend", "http://127.0.0.1:9", "--model", "m",
                "--service-tier", "flex", "--prices", str(prices))  # fmt: skip
    options = seen["driver_options"]
    assert options["service_tier"] == "flex"
    assert options["prices"] == {"m": {"flex": {"input": 1.0, "output": 2.0}}}


def test_a_service_tier_on_a_batch_api_backend_stops_the_run_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "task.toml").write_text(TASK_FILE)
    (tmp_path / "inputs.jsonl").write_text('{"word": "hi"}\n')
    code = cli.main(["run", str(tmp_path / "task.toml"), str(tmp_path / "inputs.jsonl"),
                     "-o", str(tmp_path / "out.jsonl"), "--backend", "openai-batch://127.0.0.1:9",
                     "--model", "m", "--service-tier", "flex"])  # fmt: skip
    assert code == 2
    assert "does not apply to openai-batch://" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()
