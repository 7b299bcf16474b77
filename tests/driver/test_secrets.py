"""API keys never reach results, error texts or serialised requests."""

from __future__ import annotations

import secrets
from typing import Any

import orjson
import pytest

from agentcore import ConfigError, open_driver
from agentcore.core import dumps, loads
from agentcore.wire import HttpRequest
from tests.driver.helpers import make_loop
from tests.driver.openai_server import error, open_openai_server


def _unique_key() -> str:
    return "sk-test-" + secrets.token_hex(12)


@pytest.mark.parametrize("transport", ["lean", "httpx"])
async def test_a_401_body_echoing_the_key_is_redacted_in_the_result(transport: str) -> None:
    key = _unique_key()

    def respond(body: dict[str, Any], n: int) -> Any:
        return error(401, f"Incorrect API key provided: {key}. Authorization: Bearer {key}")

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", transport=transport, api_key=key) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.error is not None
    text = f"{result.error.message} {result.error.error.message} {result!r}"
    assert key not in text
    assert key[8:] not in text  # not even the key's random part
    assert "Incorrect API key provided: <redacted>" in result.error.error.message


@pytest.mark.parametrize("transport", ["lean", "httpx"])
async def test_a_key_ending_in_a_newline_never_appears_in_errors(transport: str) -> None:
    # The header is refused by the HTTP library, whose error text quotes it; the key must be
    # refused up front (ConfigError) or scrubbed from that text, never shown.
    key = _unique_key()
    token = key[8:]
    async with open_openai_server(lambda body, n: error(500, "unused")) as server:
        try:
            async with open_driver(
                server.url, model="m", transport=transport, api_key=key + "\n"
            ) as driver:
                result = await driver.run(make_loop(0))
        except ConfigError as exc:
            assert token not in str(exc)
            return
    assert result.status == "failed"
    assert result.error is not None
    assert token not in repr(result)


def test_dumps_redacts_secret_headers_of_a_request_unless_asked_to_keep_them() -> None:
    key = _unique_key()
    request = HttpRequest(
        "POST",
        "https://api.example.test/v1/chat/completions",
        (("Authorization", f"Bearer {key}"), ("X-Api-Key", key), ("x-request-id", "r1")),
        b"{}",
    )
    redacted = dumps(request)
    assert key.encode() not in redacted
    headers = orjson.loads(redacted)["headers"]
    assert headers == [
        ["authorization", "<redacted>"],
        ["x-api-key", "<redacted>"],
        ["x-request-id", "r1"],
    ]
    kept = dumps(request, keep_secrets=True)
    assert loads(kept, HttpRequest) == request


async def test_a_secret_in_a_custom_header_is_redacted_too() -> None:
    token = "tok-" + secrets.token_hex(12)

    def respond(body: dict[str, Any], n: int) -> Any:
        return error(403, f"token {token} is not allowed here")

    async with (
        open_openai_server(respond) as server,
        open_driver(server.url, model="m", extra_headers={"X-Goog-Api-Key": token}) as driver,
    ):
        result = await driver.run(make_loop(0))
    assert result.status == "failed"
    assert token not in repr(result)
    assert result.error is not None and result.error.error is not None
    assert "token <redacted> is not allowed here" in result.error.error.message
