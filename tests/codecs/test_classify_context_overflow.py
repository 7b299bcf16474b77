"""Context overflow as each self-hosted engine words it is TOO_LARGE and final, not BAD_REQUEST.

The bodies are the shapes the engines send: llama-server's typed error (captured from
llama-server built from llama-cpp-python 0.3.36), vLLM's ``{"error": {...}}`` with the
status in ``code``, and SGLang's flat ``{"object": "error", ...}``; the messages are the
engines' own f-strings with numbers filled in.
"""

from __future__ import annotations

import orjson
import pytest

from agentcore import ErrorKind
from agentcore._codecs.classify import classify_http_error, classify_stream_error

LLAMA_SERVER = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9000,
        "n_ctx": 8192,
    }
}


def _vllm(message: str) -> dict[str, object]:
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


def _sglang(message: str) -> dict[str, object]:
    return {"object": "error", "message": message, "type": "BadRequestError", "param": None,
            "code": 400}  # fmt: skip


OVERFLOWS = {
    "llama-server": LLAMA_SERVER,
    "llama-server, type only": {"error": {"code": 400, "type": "exceed_context_size_error"}},
    "vllm input processor": _vllm(
        "The decoder prompt (length 9000) is longer than the maximum model length of 8192. "
        "Make sure that `max_model_len` is no smaller than the number of text tokens."
    ),
    "vllm serving layer": _vllm(
        "This model's maximum context length is 8192 tokens. However, your request has 9000 "
        "input tokens. Please reduce the length of the input messages."
    ),
    "sglang input": _sglang(
        "The input (9000 tokens) is longer than the model's context length (8192 tokens)."
    ),
    "sglang input + completion": _sglang(
        "Requested token count exceeds the model's maximum context length of 8192 tokens. "
        "You requested a total of 9100 tokens: 9000 tokens from the input messages and 100 "
        "tokens for the completion. Please reduce the number of tokens in the input messages "
        "or the completion to fit within the limit."
    ),
}


@pytest.mark.parametrize("body", OVERFLOWS.values(), ids=OVERFLOWS.keys())
def test_context_overflow_response_is_too_large_and_final(body: dict[str, object]) -> None:
    error = classify_http_error(400, (), orjson.dumps(body))
    assert (error.kind, error.retryable) == (ErrorKind.TOO_LARGE, False)


@pytest.mark.parametrize("body", OVERFLOWS.values(), ids=OVERFLOWS.keys())
def test_context_overflow_inside_a_stream_is_too_large(body: dict[str, object]) -> None:
    error = classify_stream_error(body)
    assert error.kind is ErrorKind.TOO_LARGE


def test_other_400s_stay_bad_requests() -> None:
    body = _sglang("The input_ids [1, 2] contains values greater than the vocab size (10).")
    assert classify_http_error(400, (), orjson.dumps(body)).kind is ErrorKind.BAD_REQUEST
