"""bedrock:// (Converse / ConverseStream): golden request fields, replies, errors, the
event-stream decoder, credentials kept out of reprs, and agents against a loopback server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import attrs
import orjson
import pytest

pytest.importorskip(
    "botocore", reason="needs the bedrock extra: pip install 'trio-agentcore[bedrock]'"
)

import agentcore
from agentcore import ConfigError, ErrorKind, ModelParams
from agentcore.core import (
    AssistantMessage,
    CallModel,
    ModelFailed,
    ModelResponded,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.bedrock.converse_server import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    SESSION_TOKEN,
    frames,
    open_converse_server,
)

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Credentials from the environment only: no profile files, no instance metadata."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    yield


LOOKUP = ToolSpec(
    "lookup",
    "Look a record up.",
    {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
)
CALL = CallModel(
    "r-1",
    (
        SystemMessage("You answer questions about records."),
        UserMessage("What about k1?"),
        AssistantMessage("Let me look.", (ToolCall("tooluse_1", "lookup", '{"key": "k1"}'),)),
        ToolMessage("tooluse_1", "lookup", "k1: active"),
        ToolMessage("tooluse_2", "lookup", "boom", is_error=True),
        UserMessage("And briefly?"),
    ),
    tools=(LOOKUP,),
    params=ModelParams(
        max_tokens=300, temperature=0.2, top_p=0.9, tool_choice="required", stop=("END",)
    ),
)


def codec(**options: Any) -> Any:
    return agentcore.wire.backend(f"bedrock://{REGION}", model=MODEL, **options).codec


def test_the_converse_request_matches_the_api_reference_field_by_field() -> None:
    request = codec(cache_prompt=True).encode(CALL)
    assert request.method == "POST"
    assert request.url == (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    )
    body = orjson.loads(request.body)
    assert body["system"] == [
        {"text": "You answer questions about records."},
        {"cachePoint": {"type": "default"}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "What about k1?"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Let me look."},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "lookup", "input": {"key": "k1"}}},
            ],
        },
        {
            "role": "user",  # tool results and the next user message share one turn
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_1",
                        "content": [{"text": "k1: active"}],
                        "status": "success",
                    }
                },
                {
                    "toolResult": {
                        "toolUseId": "tooluse_2",
                        "content": [{"text": "boom"}],
                        "status": "error",
                    }
                },
                {"text": "And briefly?"},
            ],
        },
    ]
    assert body["inferenceConfig"] == {
        "maxTokens": 300,
        "temperature": 0.2,
        "topP": 0.9,
        "stopSequences": ["END"],
    }
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "lookup",
                    "description": "Look a record up.",
                    "inputSchema": {"json": dict(LOOKUP.parameters)},
                }
            },
            {"cachePoint": {"type": "default"}},
        ],
        "toolChoice": {"any": {}},
    }
    assert set(body) == {"messages", "system", "inferenceConfig", "toolConfig"}


def test_the_request_is_signed_with_sigv4_for_bedrock_in_its_region() -> None:
    request = codec().encode(CALL, stream=True)
    headers = dict(request.headers)
    assert request.url.endswith("/converse-stream")
    assert headers["accept"] == "application/vnd.amazon.eventstream"
    assert headers["content-type"] == "application/json"
    authorization = headers["authorization"]
    date = headers["x-amz-date"]
    assert authorization.startswith(
        f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{date[:8]}/us-east-1/bedrock/aws4_request, "
    )
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "x-amz-security-token", "content-type"} <= set(signed)
    assert headers["x-amz-security-token"] == SESSION_TOKEN


def test_credentials_never_show_in_reprs() -> None:
    backend = agentcore.wire.backend(f"bedrock://{REGION}", model=MODEL)
    request = backend.codec.encode(CALL)
    shown = repr(backend) + repr(backend.codec) + repr(request) + repr(backend.codec.signer)
    assert SECRET_KEY not in shown
    assert SESSION_TOKEN not in shown
    assert "<redacted>" in repr(request)  # the Authorization header


def test_a_converse_reply_becomes_text_tool_calls_and_usage() -> None:
    body = orjson.dumps(
        {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [
                        {"text": "Checking."},
                        {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"key": "k9"}}},
                        {"reasoningContent": {"reasoningText": {"text": "hidden"}}},
                    ],
                }
            },
            "stopReason": "tool_use",
            "usage": {
                "inputTokens": 10,
                "outputTokens": 4,
                "totalTokens": 14,
                "cacheReadInputTokens": 30,
                "cacheWriteInputTokens": 5,
            },
        }
    )
    event = codec().decode("r", 200, (), body)
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage(
        "Checking.", (ToolCall("t1", "lookup", '{"key":"k9"}'),)
    )
    assert event.finish_reason == "tool_calls"
    assert (event.usage.prompt_tokens, event.usage.completion_tokens) == (45, 4)
    assert event.usage.cached_tokens == 30


@pytest.mark.parametrize(
    ("status", "error_type", "kind", "retryable"),
    [
        (429, "ThrottlingException", ErrorKind.RATE_LIMITED, True),
        (503, "ServiceUnavailableException", ErrorKind.OVERLOADED, True),
        (500, "InternalServerException", ErrorKind.SERVER, True),
        (400, "ValidationException", ErrorKind.BAD_REQUEST, False),
        (403, "AccessDeniedException", ErrorKind.AUTH, False),
        (404, "ResourceNotFoundException", ErrorKind.NOT_FOUND, False),
    ],
)
def test_errors_are_classified_like_the_other_codecs(
    status: int, error_type: str, kind: ErrorKind, retryable: bool
) -> None:
    headers = (("x-amzn-errortype", f"{error_type}:http://internal.amazon.com/coral/"),)
    event = codec().decode("r", status, headers, b'{"message": "it went wrong"}')
    assert isinstance(event, ModelFailed)
    assert (event.error.kind, event.error.retryable) == (kind, retryable)
    assert event.error.message == "it went wrong"


def feed(body: bytes, size: int) -> tuple[list[Any], ModelResponded | ModelFailed]:
    decoder = codec().stream_decoder("r")
    deltas = []
    for start in range(0, len(body), size):
        deltas += decoder.feed(body[start : start + size])
    return deltas, decoder.finish()


def test_a_recorded_shape_stream_decodes_the_same_in_any_split() -> None:
    body = frames.reply("Hello there", ("tooluse_7", "lookup", ['{"ke', 'y": "k', '1"}']))
    whole = feed(body, len(body))
    assert feed(body, 1) == whole
    assert feed(body, 7) == whole
    deltas, event = whole
    assert isinstance(event, ModelResponded)
    assert event.message == AssistantMessage(
        "Hello there", (ToolCall("tooluse_7", "lookup", '{"key":"k1"}'),)
    )
    assert event.finish_reason == "tool_calls"
    assert (event.usage.prompt_tokens, event.usage.completion_tokens) == (16, 7)
    assert "".join(d.text for d in deltas if hasattr(d, "text")) == "Hello there"


def test_stream_exceptions_truncation_and_corruption_fail_the_reply() -> None:
    start = frames.event("messageStart", {"role": "assistant"})
    _, throttled = feed(start + frames.exception("throttlingException", "slow down"), 5)
    assert isinstance(throttled, ModelFailed)
    assert throttled.error.kind is ErrorKind.RATE_LIMITED and throttled.error.retryable
    body = frames.reply("Hello")
    _, truncated = feed(body[: len(body) - 30], 9)
    assert isinstance(truncated, ModelFailed) and truncated.error.kind is ErrorKind.CONNECTION
    assert "ended inside a frame" in truncated.error.message
    corrupted = body[:20] + bytes([body[20] ^ 1]) + body[21:]
    _, broken = feed(corrupted, 9)
    assert isinstance(broken, ModelFailed) and broken.error.kind is ErrorKind.PROTOCOL


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("bedrock://", {}, "region"),
        ("bedrock://us-east-1:443", {}, "region"),
        ("bedrock://us-east-1/x", {}, "region"),
        ("bedrock://us-east-1", {"api_key": "k"}, "api_key"),
        ("bedrock://us-east-1", {"colour": "red"}, "unknown bedrock"),
    ],
)
def test_bad_bedrock_urls_and_options_are_config_errors(
    url: str, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        agentcore.wire.backend(url, model=MODEL, **options)


def test_missing_credentials_are_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(ConfigError, match="no AWS credentials"):
        agentcore.wire.backend("bedrock://us-east-1", model=MODEL)


# ----------------------------------------------------------------------------- loopback


@agentcore.tool
async def lookup(key: str) -> str:
    """Look a record up.

    Args:
        key: the record key.
    """
    return f"{key}: active"


@pytest.mark.parametrize("stream", [False, True])
async def test_agents_run_against_a_converse_server_that_checks_signatures(stream: bool) -> None:
    task = agentcore.Task(prompt="What about record {r}?", tools=[lookup], max_turns=3)
    async with open_converse_server() as server:
        results = await agentcore.run_batch(
            task,
            [{"r": "k1"}, {"r": "k2"}],
            backend=f"bedrock://{REGION}",
            model=MODEL,
            endpoint_url=server.url,
            stream=stream,
            warm=False,
        )
    assert [r.status for r in results] == ["ok", "ok"]
    assert all(r.output == "The record k1 is active." for r in results)
    assert all(seen["signature_ok"] for seen in server.seen)
    assert len(server.seen) == 4
    operation = "converse-stream" if stream else "converse"
    assert {urlsplit(s["target"]).path for s in server.seen} == {
        f"/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/{operation}"
    }
    second = server.seen[-1]["body"]["messages"]
    assert any("toolResult" in block for block in second[-1]["content"])


async def test_throttling_is_retried_with_back_off(autojump_clock: Any) -> None:
    task = agentcore.Task(prompt="What about record {r}?", max_turns=1)
    async with open_converse_server(throttle_first=2) as server:
        [result] = await agentcore.run_batch(
            task,
            [{"r": "k1"}],
            backend=f"bedrock://{REGION}",
            model=MODEL,
            endpoint_url=server.url,
            warm=False,
        )
    assert result.status == "ok"
    assert result.timings.attempts == 3


async def test_a_bad_signature_is_an_auth_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    task = agentcore.Task(prompt="What about record {r}?", max_turns=1)
    async with open_converse_server() as server:
        [result] = await agentcore.run_batch(
            task,
            [{"r": "k1"}],
            backend=f"bedrock://{REGION}",
            model=MODEL,
            endpoint_url=server.url,
            warm=False,
        )
    assert result.status == "failed"
    assert result.error is not None and result.error.error is not None
    assert result.error.error.kind is ErrorKind.AUTH
    assert not server.seen[0]["signature_ok"]


def test_a_tool_forced_by_name_is_converse_s_tool_choice_and_none_sends_no_choice() -> None:
    def choice_of(tool_choice: str) -> object:
        call = attrs.evolve(CALL, params=ModelParams(max_tokens=300, tool_choice=tool_choice))
        return orjson.loads(codec().encode(call, stream=False).body)["toolConfig"].get("toolChoice")

    assert choice_of("lookup") == {"tool": {"name": "lookup"}}
    assert choice_of("auto") == {"auto": {}}
    assert choice_of("none") is None
