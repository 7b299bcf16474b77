"""Choosing the warm-up, reading llama-server's slot list, and counting the warm-up request."""

from __future__ import annotations

import pytest

import agentcore
from agentcore import ConfigError
from agentcore._tasks.warmup import SLOT_FILE, slot_action, slots_request, warm_slot
from agentcore.testing import ScriptedModel


def test_the_warm_slot_is_the_one_that_served_the_latest_task() -> None:
    slots = [
        {"id": 0, "n_ctx": 8192, "is_processing": False},
        {"id": 1, "n_ctx": 8192, "is_processing": False, "id_task": 7},
        {"id": 2, "n_ctx": 8192, "is_processing": False, "id_task": 12},
    ]
    assert warm_slot(slots) == (2, [0, 1, 2])


@pytest.mark.parametrize(
    "answer",
    [None, [], {"id": 0}, [{"id": "0", "id_task": 1}], [{"id": 0}], ["slot"]],
)
def test_an_unusable_slot_list_gives_no_warm_slot(answer: object) -> None:
    assert warm_slot(answer) is None


def test_slot_requests_go_to_the_server_root() -> None:
    assert slots_request("http://h:8080/v1").url == "http://h:8080/slots"
    save = slot_action("http://h:8080/v1", 3, "save")
    assert (save.method, save.url) == ("POST", "http://h:8080/slots/3?action=save")
    assert SLOT_FILE.encode() in save.body


async def test_the_warm_up_request_is_counted_in_the_driver_statistics() -> None:
    model = ScriptedModel(lambda call: "done")
    task = agentcore.Task(prompt="Say {word}.", system="Be brief.")
    async with agentcore.open_driver(model) as driver:
        async with agentcore.open_batch(task, [{"word": "a"}, {"word": "b"}], driver=driver,
                                        warm="request") as stream:  # fmt: skip
            results = [r async for r in stream]
        stats = driver.statistics()
    assert stream.warm_up is not None
    assert (stream.warm_up.strategy, stream.warm_up.done) == ("request", "request")
    assert stats.requests == sum(r.turns for r in results) + 1
    assert stats.prompt_tokens == (
        sum(r.usage.prompt_tokens for r in results) + stream.warm_up.usage.prompt_tokens
    )


async def test_slot_copy_without_an_http_backend_falls_back_to_one_request() -> None:
    model = ScriptedModel(lambda call: "done")
    task = agentcore.Task(prompt="Say {word}.")
    async with (
        agentcore.open_driver(model) as driver,
        agentcore.open_batch(task, [{"word": "a"}], driver=driver, warm="slots") as stream,
    ):
        _ = [r async for r in stream]
    assert stream.warm_up is not None
    assert (stream.warm_up.done, stream.warm_up.slots_filled) == ("request", 1)
    assert "HTTP backend" in stream.warm_up.detail


async def test_an_unknown_warm_up_is_a_config_error() -> None:
    model = ScriptedModel(lambda call: "done")
    async with agentcore.open_driver(model) as driver:
        with pytest.raises(ConfigError, match="warm"):
            async with agentcore.open_batch(agentcore.Task(prompt="x"), [1], driver=driver,
                                            warm="everything"):  # fmt: skip
                pass
