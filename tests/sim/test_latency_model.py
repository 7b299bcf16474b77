"""The pure parts of the simulator's latency model: tokens, prefix cache, timing, config."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore import ConfigError
from agentcore._sim.prefix_cache import PrefixCache, block_hashes
from agentcore._sim.request import parse_chat_request
from agentcore._sim.template import render_prompt, render_prompt_parts, render_reply
from agentcore._sim.tokens import TokenMemo, count_tokens, split_tokens
from agentcore.sim import SimConfig


@settings(max_examples=200)
@given(st.text())
def test_tokens_join_back_to_the_text(text: str) -> None:
    pieces = split_tokens(text)
    assert "".join(pieces) == text
    assert count_tokens(text) == len(pieces)
    assert all(pieces)


def test_tokens_are_at_most_four_letters_plus_one_space() -> None:
    pieces = split_tokens("internationalization of parsers, quickly!")
    assert pieces[:5] == ["inte", "rnat", "iona", "liza", "tion"]
    assert " of" in pieces and "," in pieces and "!" in pieces
    assert max(len(p) for p in pieces) <= 5


def test_english_prose_costs_about_one_token_per_four_characters() -> None:
    text = "The quick brown fox jumps over the lazy dog while the cat sleeps. " * 20
    assert 3.0 <= len(text) / count_tokens(text) <= 4.5


@settings(max_examples=100)
@given(st.text(), st.text().filter(lambda t: not t[:1].isspace()))
def test_a_reply_after_a_newline_tokenizes_the_same_alone_and_appended(
    prompt: str, reply: str
) -> None:
    prompt += "\n"
    assert split_tokens(prompt + reply) == split_tokens(prompt) + split_tokens(reply)


_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text()}
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=100)
@given(_messages, st.booleans())
def test_prompts_tokenized_by_parts_match_the_whole(
    messages: list[dict[str, str]], tools: bool
) -> None:
    body = {"messages": messages, "tools": [{"type": "function", "function": {"name": "t"}}]}
    request = parse_chat_request(body if tools else {"messages": messages})
    parts = render_prompt_parts(request)
    memo = TokenMemo(capacity=2)
    assert memo.split(parts) == split_tokens(render_prompt(request))
    assert memo.split(parts) == split_tokens(render_prompt(request))


def test_rendered_reply_is_the_next_prompts_continuation() -> None:
    first = parse_chat_request({"messages": [{"role": "user", "content": "hi"}]})
    content = "Hello there"
    second = parse_chat_request(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": content},
                {"role": "user", "content": "more"},
            ]
        }
    )
    assert render_prompt(second).startswith(render_prompt(first) + render_reply(content, ()))


def test_tools_render_after_the_system_prompt_and_before_the_conversation() -> None:
    request = parse_chat_request(
        {
            "messages": [
                {"role": "system", "content": "SYSTEM"},
                {"role": "user", "content": "USER"},
            ],
            "tools": [{"type": "function", "function": {"name": "lookup"}}],
        }
    )
    prompt = render_prompt(request)
    assert prompt.index("SYSTEM") < prompt.index('"lookup"') < prompt.index("USER")


def _pieces(n: int, tag: str = "a") -> list[str]:
    return [f"{tag}{i}" for i in range(n)]


def test_block_names_cover_full_blocks_only() -> None:
    assert len(block_hashes(_pieces(47), 16)) == 2
    assert len(block_hashes(_pieces(48), 16)) == 3
    assert block_hashes(_pieces(15), 16) == []


def test_block_names_are_chained_on_the_whole_prefix() -> None:
    base = _pieces(64)
    changed = [*base[:20], "x", *base[21:]]
    a, b = block_hashes(base, 16), block_hashes(changed, 16)
    assert a[0] == b[0]
    assert all(x != y for x, y in zip(a[1:], b[1:], strict=True))


def test_block_names_continue_from_known_names() -> None:
    tokens = _pieces(100)
    known = block_hashes(tokens[:40], 16)
    assert block_hashes(tokens, 16, known=known) == block_hashes(tokens, 16)


def test_cache_salt_isolates_identical_prompts() -> None:
    assert block_hashes(_pieces(32), 16, "t1")[0] != block_hashes(_pieces(32), 16, "t2")[0]


def test_cache_hit_is_the_longest_cached_prefix() -> None:
    cache = PrefixCache(100)
    names = block_hashes(_pieces(80), 16)
    assert cache.match(names) == 0
    cache.insert(names[:3])
    assert cache.match(names) == 3
    other = block_hashes([*_pieces(40), *_pieces(40, "b")], 16)
    assert cache.match(other) == 2
    stats = cache.statistics()
    assert (stats.lookups, stats.hit_blocks, stats.blocks) == (3, 5, 3)


def test_lru_eviction_drops_the_least_recently_used_blocks() -> None:
    cache = PrefixCache(4)
    first = block_hashes(_pieces(32, "f"), 16)
    second = block_hashes(_pieces(32, "s"), 16)
    third = block_hashes(_pieces(32, "t"), 16)
    cache.insert(first)
    cache.insert(second)
    assert cache.match(first) == 2  # first is now more recent than second
    cache.insert(third)
    assert cache.match(second) == 0
    assert cache.match(first) == 2
    assert cache.statistics().evictions == 2
    assert len(cache) == 4


def test_eviction_takes_a_sequences_tail_before_its_head() -> None:
    cache = PrefixCache(3)
    names = block_hashes(_pieces(80), 16)
    cache.insert(names)
    assert names[0] in cache
    assert cache.match(names) == 3


def test_a_cache_without_capacity_holds_nothing() -> None:
    cache = PrefixCache(0)
    names = block_hashes(_pieces(64), 16)
    cache.insert(names)
    assert cache.match(names) == 0


def test_prefill_and_decode_times_scale_with_tokens_and_speedup() -> None:
    config = SimConfig(prefill_us_per_token=20, decode_ms_per_token=2)
    assert config.prefill_seconds(1000) == pytest.approx(0.02)
    assert config.decode_seconds(50) == pytest.approx(0.1)
    fast = SimConfig(prefill_us_per_token=20, decode_ms_per_token=2, speedup=10)
    assert fast.prefill_seconds(1000) == pytest.approx(0.002)
    assert fast.decode_seconds(50) == pytest.approx(0.01)


@pytest.mark.parametrize(
    "changes",
    [
        {"slots": 0},
        {"block_size": 0},
        {"repeat_share": 1.5},
        {"fail_rate": -0.1},
        {"speedup": 0},
        {"scheduling": "lifo"},
        {"model": ""},
        {"prefill_us_per_token": -1},
        {"slots": "3"},
        {"slots": True},
        {"seed": 1.5},
        {"speedup": float("nan")},
        {"repeat_share": None},
    ],
)
def test_invalid_settings_raise_config_error(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        SimConfig(**changes)  # type: ignore[arg-type]
