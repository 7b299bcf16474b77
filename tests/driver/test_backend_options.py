"""A backend's options: one typed home, checked when built, the same from every entry point.

``wire.backend(url, ...)``, the keywords of ``open_driver`` that are no ``DriverOptions``
field, ``DriverOptions.backend_options`` and ``Fallback.options`` all take the backend's
options, check them with the same table when the value carrying them is built, and mean the
same; a configured ``Backend`` takes its own options there as well. An option the backend
cannot use is a ``ConfigError``, never dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentcore import (
    ConfigError,
    DriverOptions,
    Fallback,
    RetryPolicy,
    open_driver,
    run_batch,
    wire,
)
from agentcore._backends.options import OWN_OPTIONS
from agentcore._codecs.anthropic import AnthropicCodec
from agentcore._codecs.openai import OpenAICodec
from agentcore._driver.options import OPTION_NAMES
from agentcore.core import CallModel, UserMessage
from agentcore.sim import open_sim_server
from agentcore.testing import ScriptedModel
from tests.driver.test_service_tiers import PRICES, TASK, lookup, sim

INPUTS = [{"x": n} for n in range(6)]


# -------------------------------------------------------------------- a configured Backend


async def test_a_configured_backend_is_sent_on_the_tier_and_priced_as_open_driver_is_told() -> None:
    configured = wire.backend("sim://", model="", config=sim())
    async with open_driver(
        configured, tools=[lookup], service_tier="flex", prices=PRICES
    ) as driver:
        results = await run_batch(TASK, INPUTS, driver=driver)
        stats = driver.statistics()
    assert [r.status for r in results] == ["ok"] * len(INPUTS)
    assert stats.cost is not None
    assert set(stats.cost.tiers) == {"flex"}
    assert stats.cost.tiers["flex"].requests == stats.requests > 0
    assert stats.cost.cost is not None and stats.cost.cost > 0.0


async def test_the_flex_requests_of_a_configured_backend_reach_the_server() -> None:
    # The simulator refuses every flex request for capacity: each one was sent asking for
    # flex, then went on to the standard tier.
    configured = wire.backend("sim://", model="", config=sim(flex_refuse_rate=1.0))
    async with open_driver(configured, tools=[lookup], service_tier="flex-then-standard") as driver:
        results = await run_batch(TASK, INPUTS, driver=driver)
        stats = driver.statistics()
    assert all(r.status == "ok" for r in results)
    assert stats.cost is not None
    assert stats.cost.flex_refused == stats.cost.flex_attempts == stats.requests > 0


async def test_a_configured_batch_api_backend_sends_its_calls_through_the_batch_api(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "hops.jsonl"
    async with open_sim_server(config=sim(batch_delay=0.05)) as server:
        host = server.url.removesuffix("/v1").removeprefix("http://")
        configured = wire.backend(f"openai-batch://{host}", model="m", journal=journal)
        async with open_driver(
            configured, tools=[lookup], gather=0.05, poll=0.01, poll_max=0.05
        ) as driver:
            results = await run_batch(TASK, INPUTS, driver=driver)
            cost = driver.statistics().cost
        created = server.statistics().batches_created
    assert all(r.status == "ok" for r in results)
    assert created >= 1
    assert journal.exists()
    assert cost is not None
    assert set(cost.tiers) == {"batch"}


async def test_a_configured_backend_refuses_what_was_fixed_when_it_was_built() -> None:
    configured = wire.backend("sim://", model="", config=sim())
    with pytest.raises(ConfigError, match="configured for model 'sim'"):
        async with open_driver(configured, model="another"):
            pass
    with pytest.raises(ConfigError, match=r"\['priority'\] are fixed"):
        async with open_driver(configured, priority=True):
            pass


# -------------------------------------------------------------------- wire.backend


def test_wire_backend_takes_a_service_tier_and_batch_settings(tmp_path: Path) -> None:
    flex = wire.backend("openai://", model="o4-mini", api_key="sk-test", service_tier="flex")
    assert flex.service_tier == "flex"
    journal = tmp_path / "hops.jsonl"
    batch = wire.backend(
        "openai-batch://", model="gpt-4o-mini", api_key="sk-test", journal=journal, gather=2.0
    )
    assert batch.batch == wire.BatchSettings(journal=journal, gather=2.0)
    assert flex.batch is None


# Each option of the backend with a value it refuses, and the words the refusal says.
REFUSED: list[tuple[str, str, object, str]] = [
    ("openai-batch://127.0.0.1:1", "journal", 3, "journal must be a file path"),
    ("openai-batch://127.0.0.1:1", "gather", -1, "gather must be a number of seconds"),
    ("openai-batch://127.0.0.1:1", "poll", "soon", "poll must be a number of seconds"),
    ("openai-batch://127.0.0.1:1", "poll_max", True, "poll_max must be a number of seconds"),
    ("openai-batch://127.0.0.1:1", "replace_journal", 1, "replace_journal must be True or False"),
    ("openai-batch://127.0.0.1:1", "max_enqueued_tokens", 0, "max_enqueued_tokens must be a"),
    ("openai-batch://127.0.0.1:1", "clean_up", "yes", "clean_up must be True or False"),
    ("http://127.0.0.1:1", "service_tier", "bogus", "service_tier must be one of"),
    ("http://127.0.0.1:1", "stream", "yes", "stream must be True or False"),
    ("http://127.0.0.1:1", "transport", "tcp", "transport must be one of"),
    ("http://127.0.0.1:1", "max_reply_bytes", 0, "max_reply_bytes must be"),
    ("http://127.0.0.1:1", "warm_up", "always", "warm_up must be one of"),
    ("https://127.0.0.1:1", "verify", "no", "verify must be True, False or an ssl.SSLContext"),
    ("vllm://127.0.0.1:1", "align_prefix", "always", "align_prefix must be"),
    ("http://127.0.0.1:1", "dialect", "klingon", "unknown dialect"),
    ("sim://", "config", {"seed": 3}, "config must be a SimConfig"),
]


def test_the_table_of_refusals_covers_every_own_option_of_a_backend() -> None:
    assert {name for _, name, _, _ in REFUSED} == set(OWN_OPTIONS)


@pytest.mark.parametrize(("url", "name", "value", "words"), REFUSED)
async def test_every_entry_point_refuses_a_bad_backend_option_alike_when_it_is_built(
    url: str, name: str, value: object, words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        wire.backend(url, model="m", **{name: value})
    with pytest.raises(ConfigError, match=words):
        DriverOptions(backend_options={name: value})
    with pytest.raises(ConfigError, match=words):
        Fallback(url, options={name: value})
    # ``stream`` and ``transport`` are also fields of DriverOptions (the driver's, for every
    # backend): as a keyword they are checked there, in that field's words.
    with pytest.raises(ConfigError, match=name if name in OPTION_NAMES else words):
        async with open_driver(url, model="m", **{name: value}):
            pass


@pytest.mark.parametrize(
    ("url", "options", "words"),
    [
        ("openai-batch://127.0.0.1:1", {"service_tier": "flex"}, "does not apply"),
        ("openai-batch://127.0.0.1:1", {"service_tier": "standard"}, "does not apply"),
        ("openai-batch://127.0.0.1:1", {"stream": True}, "stream=True does not apply"),
        ("anthropic://127.0.0.1:1", {"service_tier": "flex"}, "no flex tier"),
        ("llamacpp://127.0.0.1:1", {"align_prefix": True}, "align_prefix=True needs an engine"),
        ("vllm://127.0.0.1:1", {"journal": "hops.jsonl"}, "apply to openai-batch"),
        ("vllm://127.0.0.1:1", {"reasoning_effort": "low"}, "reasoning_effort"),
        ("vllm://127.0.0.1:1", {"prompt_cache_key": True}, "not supported by the vllm"),
    ],
)
async def test_an_option_the_backend_cannot_use_is_refused_not_dropped(
    url: str, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        wire.backend(url, model="m", **options)
    with pytest.raises(ConfigError, match=words):
        async with open_driver(url, model="m", **options):
            pass


# -------------------------------------------------------------------- DriverOptions


def test_driver_options_refuse_a_backend_option_saying_where_it_goes() -> None:
    with pytest.raises(ConfigError, match=r"options of the backend.*backend_options"):
        DriverOptions(service_tier="flex")  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="has no option"):
        DriverOptions(max_inflgiht=4)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"options of the backend.*Fallback\(options="):
        Fallback("sim://", service_tier="flex")  # type: ignore[call-arg]


def test_driver_options_check_the_backend_options_they_carry_when_built() -> None:
    with pytest.raises(ConfigError, match="service_tier must be one of"):
        DriverOptions(backend_options={"service_tier": "bogus"})
    with pytest.raises(ConfigError, match="'reasoning_effort' is no option of any backend"):
        DriverOptions(backend_options={"reasoning_effort": "low"})
    with pytest.raises(ConfigError, match=r"model is DriverOptions\.model"):
        DriverOptions(backend_options={"model": "m"})
    options = DriverOptions(backend_options={"service_tier": "flex", "priority": True})
    assert dict(options.backend_options) == {"service_tier": "flex", "priority": True}


def test_prices_are_checked_when_the_options_are_built() -> None:
    with pytest.raises(ConfigError, match="unknown tier"):
        DriverOptions(prices={"m": {"slow": {"input": 1.0, "output": 1.0}}})
    with pytest.raises(ConfigError, match="needs 'input' and 'output'"):
        DriverOptions(prices={"m": {"flex": {"input": 1.0}}})


# -------------------------------------------------------------------- exact cost


async def test_an_exact_cost_refuses_a_price_for_a_model_no_backend_sends() -> None:
    prices = {**PRICES, "simm": PRICES["sim"]}  # a misspelt name: its price would go unused
    with pytest.raises(ConfigError, match=r"names \['simm'\]"):
        async with open_driver("sim://", config=sim(), prices=prices, exact_cost=True):
            pass


async def test_an_exact_cost_refuses_a_backend_model_without_a_price() -> None:
    with pytest.raises(ConfigError, match="no price for 'sim' on 'flex'"):
        async with open_driver(
            "sim://", config=sim(), service_tier="flex", prices={"sim": {"standard": {
                "input": 1.0, "output": 1.0}}}, exact_cost=True,
        ):  # fmt: skip
            pass


async def test_an_exact_cost_opens_when_every_model_is_priced() -> None:
    async with open_driver(
        "sim://", tools=[lookup], config=sim(), service_tier="flex", prices=PRICES,
        exact_cost=True,
    ) as driver:  # fmt: skip
        await run_batch(TASK, INPUTS[:2], driver=driver)
        cost = driver.statistics().cost
    assert cost is not None
    assert cost.unpriced == ()
    assert cost.cost is not None and cost.cost > 0.0


async def test_a_model_for_a_fallback_model_client_is_refused_not_dropped() -> None:
    fallback = Fallback(ScriptedModel(lambda call: "x"), model="gpt-4o")
    with pytest.raises(ConfigError, match="a model client sends its own model"):
        async with open_driver(ScriptedModel(lambda call: "x"), fallback=[fallback]):
            pass


async def test_prices_for_a_model_client_that_counts_no_tokens_are_refused() -> None:
    with pytest.raises(ConfigError, match="a model client counts none"):
        async with open_driver(ScriptedModel(lambda call: "x"), prices=PRICES):
            pass


# -------------------------------------------------------------------- the flex tier


def _call(**fields: Any) -> CallModel:
    return CallModel("r1", (UserMessage("hi"),), **fields)


def test_the_flex_tier_is_a_property_of_the_request_that_the_codec_writes() -> None:
    codec = OpenAICodec(base_url="http://h/v1", model="m")
    assert b'"service_tier":"flex"' in codec.encode(_call(service_tier="flex")).body
    assert b"service_tier" not in codec.encode(_call()).body


def test_a_codec_of_an_api_without_tiers_refuses_a_request_that_asks_for_one() -> None:
    codec = AnthropicCodec(base_url="http://h", model="m")
    with pytest.raises(ConfigError, match="no service tiers"):
        codec.encode(_call(service_tier="flex"))


async def test_a_fallback_given_as_a_configured_backend_keeps_its_own_model() -> None:
    # The driver's model is the primary's; a configured fallback sends the model it was
    # built with.
    fallback = wire.backend("sim://", model="other", config=sim())
    async with open_driver(
        "sim://", model="m", tools=[lookup], config=sim(fail_rate=1.0), fallback=[fallback],
        retry=RetryPolicy(max_attempts=1),
    ) as driver:  # fmt: skip
        results = await run_batch(TASK, INPUTS[:2], driver=driver)
    assert all(r.status == "ok" for r in results)
    assert all(r.served_by == ("fallback-1",) * r.turns for r in results)
