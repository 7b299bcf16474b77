"""Images in user messages: values, templates, both dialects, snapshots and the simulator."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

import agentcore
from agentcore import ConfigError, RenderError, Task, run_batch
from agentcore._tasks.task import compile_job, render_message
from agentcore.core import (
    AgentLoop,
    CallModel,
    Image,
    LoopConfig,
    LoopSnapshot,
    SystemMessage,
    UserMessage,
    dumps,
    loads,
)
from agentcore.sim import SimConfig

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(24))
PNG_B64 = base64.b64encode(PNG).decode()
PHOTO = Image(data=PNG, media_type="image/png")
REMOTE = Image(url="https://example.com/cat.jpg", media_type="image/jpeg")


def body(url: str, message: UserMessage, **options: Any) -> dict[str, Any]:
    codec = agentcore.wire.backend(url, model="m", api_key="k", **options).codec
    call = CallModel("r/0", (SystemMessage("sys"), message))
    return orjson.loads(codec.encode(call, stream=False).body)  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- values


def test_parts_place_each_image_at_its_offset_and_unplaced_ones_last() -> None:
    message = UserMessage(
        "before after",
        (REMOTE, Image(url="https://e/x.png", at=7), Image(url="https://e/y.png", at=0)),
    )
    assert message.parts() == [
        Image(url="https://e/y.png", at=0),
        "before ",
        Image(url="https://e/x.png", at=7),
        "after",
        REMOTE,
    ]
    assert UserMessage("text").parts() == ["text"]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "exactly one"),
        ({"data": PNG, "url": "https://e/x.png", "media_type": "image/png"}, "exactly one"),
        ({"data": PNG}, "media_type"),
        ({"data": "not bytes", "media_type": "image/png"}, "bytes"),
        ({"url": "file:///etc/passwd"}, "URL"),
        ({"url": "https://e/x.svg", "media_type": "image/svg+xml"}, "media_type"),
        ({"url": "https://e/x.png", "at": -1}, "at"),
    ],
)
def test_bad_images_are_config_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Image(**options)


def test_an_offset_past_the_text_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="past the end"):
        UserMessage("abc", (Image(url="https://e/x.png", at=4),))
    with pytest.raises(ConfigError, match="Image values"):
        UserMessage("abc", ("https://e/x.png",))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- dialects


@pytest.mark.parametrize(
    "url", ["vllm://127.0.0.1:8000", "openai://", "dynamo://h:1", "sglang://h"]
)
def test_openai_compatible_dialects_send_image_url_parts(url: str) -> None:
    message = UserMessage(
        "Compare  with this.", (Image(data=PNG, media_type="image/png", at=8), REMOTE)
    )
    user = body(url, message)["messages"][1]
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Compare "},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
            {"type": "text", "text": " with this."},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        ],
    }


def test_a_message_without_images_keeps_its_plain_string_content() -> None:
    assert body("vllm://h", UserMessage("hi"))["messages"][1] == {"role": "user", "content": "hi"}
    assert body("anthropic://", UserMessage("hi"))["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


def test_anthropic_sends_image_blocks_with_base64_or_url_sources() -> None:
    data_url = Image(url=f"data:image/png;base64,{PNG_B64}")
    message = UserMessage("Look: ", (PHOTO, REMOTE, data_url))
    (turn,) = body("anthropic://", message)["messages"]
    assert turn["role"] == "user"
    assert turn["content"] == [
        {"type": "text", "text": "Look: "},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
    ]


# ----------------------------------------------------------------------------- templates


def test_a_template_places_an_inputs_image_where_its_placeholder_stands() -> None:
    task = Task(prompt="Describe the photo {photo} in {words} words.")
    message = render_message(task, {"photo": PHOTO, "words": 10})
    assert message.content == "Describe the photo  in 10 words."
    assert message.images == (Image(data=PNG, media_type="image/png", at=19),)
    assert message.parts()[0] == "Describe the photo "


def test_a_placeholder_may_stand_for_several_images() -> None:
    task = Task(prompt="Which differ? {shots}")
    message = render_message(task, {"shots": [PHOTO, REMOTE]})
    assert [i.at for i in message.images] == [14, 14]
    assert message.parts() == ["Which differ? ", *message.images]


def test_an_image_input_without_a_mapping_fills_input() -> None:
    message = render_message(Task(prompt="What is in {input}?"), REMOTE)
    assert message.content == "What is in ?"
    assert message.images[0].at == 11


def test_a_missing_placeholder_with_images_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="missing"):
        render_message(Task(prompt="{photo} {missing}"), {"photo": PHOTO})


def test_the_shared_prefix_is_byte_identical_across_inputs_with_different_images() -> None:
    task = Task(system="You look at photos.", prompt="Describe this photo in detail: {photo}")
    bodies = []
    for index, image in enumerate([PHOTO, REMOTE]):
        loop = compile_job(task, {"photo": image}, run_id=f"b-{index}")
        (call,) = loop.start()
        assert isinstance(call, CallModel)
        codec = agentcore.wire.backend("vllm://h", model="m").codec
        bodies.append(orjson.loads(codec.encode(call, stream=False).body))
    first, second = bodies
    assert orjson.dumps(first["messages"][0]) == orjson.dumps(second["messages"][0])
    head = [b["messages"][1]["content"][0] for b in bodies]
    assert head[0] == head[1] == {"type": "text", "text": task.prefix_text}
    assert first["messages"][1]["content"][1] != second["messages"][1]["content"][1]


# ----------------------------------------------------------------------------- snapshots


def test_a_snapshot_carries_the_images_of_its_transcript() -> None:
    config = LoopConfig(run_id="r")
    loop = AgentLoop(config, [UserMessage("see ", (PHOTO, REMOTE))])
    loop.start()
    data = dumps(loop.snapshot())
    assert PNG_B64.encode() in data
    restored = AgentLoop.restore(config, loads(data, LoopSnapshot))
    assert restored.transcript == loop.transcript
    (user,) = restored.transcript
    assert isinstance(user, UserMessage) and user.images[0].data == PNG


@pytest.mark.parametrize("bad", ['"@@not base64@@"', "123"])
def test_image_data_must_be_base64_text_on_load(bad: str) -> None:
    data = (
        '{"type":"user","content":"x","images":[{"data":' + bad + ',"url":null,'
        '"media_type":"image/png","at":null}]}'
    )
    with pytest.raises(agentcore.DecodeError, match=r"images\[0\]\.data"):
        loads(data, agentcore.core.Message)


# ----------------------------------------------------------------------------- the simulator


async def test_the_simulator_answers_requests_with_images() -> None:
    task = Task(prompt="Describe {photo} briefly.")
    results = await run_batch(
        task,
        [{"photo": PHOTO}, {"photo": REMOTE}],
        backend="sim://",
        config=SimConfig(speedup=100.0),
    )
    assert [r.status for r in results] == ["ok", "ok"]
    assert results[0].transcript[0] == UserMessage(
        "Describe  briefly.", (Image(data=PNG, media_type="image/png", at=9),)
    )


def test_an_image_that_fails_its_own_checks_on_load_says_why() -> None:
    data = (
        '{"type":"user","content":"x","images":[{"data":null,"url":null,'
        '"media_type":"image/png","at":null}]}'
    )
    with pytest.raises(agentcore.DecodeError, match=r"exactly one of .* @ \$\.images\[0\]"):
        loads(data, agentcore.core.Message)
