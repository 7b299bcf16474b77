"""Warming a server's prefix cache before a batch fans out, one strategy per engine.

Every agent of a batch starts with the same prefix (system prompt, output schema, tools). A
prefix-caching server computes it once if one request carrying it finishes before the fan-out;
how much that buys depends on where the engine keeps the cache:

- ``off``: nothing is sent (hosted APIs: no shared cache to warm, and a request costs money).
- ``check``: one one-token request *without* the prefix (:data:`CHECK_PROMPT`), which only
  shows that the backend serves the model, so a dead backend still fails the batch before it
  starts. For engines that share a prefix between requests scheduled together (vLLM enters a
  request's blocks in its cache when it schedules them): the first requests compute the
  prefix once among themselves, so a warm request would only put its round trip before the
  fan-out. The batch sends it while it measures the prefix (:mod:`._align`), so it adds no
  round trip of its own.
- ``request``: one one-token request carrying the prefix. Enough for engines whose prefix cache
  is shared by all requests but filled only once a request is computed (SGLang's radix cache,
  Dynamo's KV router, the simulator).
- ``slots``: llama.cpp's llama-server keeps its cache *per slot* (``-np``); a request reuses a
  prefix only when it lands on a slot that computed it. One warm request fills one slot, and the
  first burst's other slots compute the prefix again. So after the warm request the warm slot is
  saved (``POST /slots/{id}?action=save``) and restored into every other slot
  (``action=restore``): every first request finds the prefix. This needs the server started
  with ``--slot-save-path``; without it (HTTP 501) the warm-up stays a ``request`` warm-up and
  the report says why. The file is always named :data:`SLOT_FILE`, so repeated batches overwrite
  one file rather than filling the server's directory.

The warm request goes through :meth:`Driver.call_model`, so the driver's statistics count it
like every other request the batch sent (its usage is in :attr:`WarmUpReport.usage`, not in any
``Result``). The slot copies are not model requests and are not counted there.

Nothing here fails a batch: a failed warm-up only means colder first requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import attrs
import orjson
import trio

from .._codecs.codec import WarmUp
from .._codecs.http import HttpRequest, Timeouts
from .._core.config import LoopConfig
from .._core.error_policy import policy_of
from .._core.errors import AgentcoreError, ConfigError
from .._core.events import CallModel, ModelError, ModelResponded
from .._core.loop import AgentLoop
from .._core.messages import Usage, UserMessage
from .._transports.model_client import HttpModelClient
from .align import PrefixAlignment
from .task import Task, job_run_id, one_token_call, prefix_call

if TYPE_CHECKING:
    from .._driver.driver import Driver

__all__ = [
    "CHECK_PROMPT",
    "SLOT_FILE",
    "BackendUnavailable",
    "WarmUpReport",
    "check_tier",
    "tier_unchecked",
    "warm_prefix",
    "warm_up",
]

CHECK_PROMPT = "Reply with one word."
"""The user message of the ``check`` warm-up's one-token request."""

SLOT_FILE = "agentcore-warm-prefix.bin"
"""The file name the warm slot is saved under, inside the server's ``--slot-save-path``."""

_SLOT_TIMEOUTS = Timeouts(connect=10.0, read=60.0, total=120.0)


@attrs.frozen
class WarmUpReport:
    """What a batch's warm-up did."""

    strategy: WarmUp
    """The strategy asked for."""
    done: WarmUp
    """What was achieved: ``slots`` only when every slot received the prefix."""
    usage: Usage = Usage()
    """Tokens of the warm request (counted in the driver's statistics, in no ``Result``)."""
    slots_filled: int = 0
    """Slots holding the prefix after the warm-up (``check``: 0; ``request``: 1; ``slots``:
    all)."""
    detail: str = ""
    """Why the warm-up achieved less than asked, if it did."""
    seconds: float = 0.0
    """How long the warm-up took (the batch's agents started after it)."""
    alignment: PrefixAlignment | None = None
    """How the batch padded its shared prefix to the engine's cache blocks before the warm-up
    (``None``: the backend does not align, ``align_prefix``)."""


# ----------------------------------------------------------------------------- wire (pure)


def _root(base_url: str) -> str:
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def slots_request(base_url: str) -> HttpRequest:
    """``GET /slots``: the server's slots and what each last processed."""
    return HttpRequest("GET", f"{_root(base_url)}/slots", (("accept", "application/json"),))


def slot_action(base_url: str, slot: int, action: str) -> HttpRequest:
    """``POST /slots/{slot}?action=save|restore`` with :data:`SLOT_FILE`."""
    body = orjson.dumps({"filename": SLOT_FILE})
    return HttpRequest(
        "POST",
        f"{_root(base_url)}/slots/{slot}?action={action}",
        (("content-type", "application/json"),),
        body,
    )


def warm_slot(slots: Any) -> tuple[int, list[int]] | None:
    """From ``GET /slots``: the slot that served the latest task (the warm request, since the
    batch has not started) and the ids of all slots; ``None`` if the answer is unusable."""
    if not isinstance(slots, list) or not slots:
        return None
    ids: list[int] = []
    latest: tuple[int, int] | None = None
    for slot in slots:
        if not isinstance(slot, dict):
            return None
        slot_id, task = slot.get("id"), slot.get("id_task")
        if type(slot_id) is not int:
            return None
        ids.append(slot_id)
        if type(task) is int and (latest is None or task > latest[0]):
            latest = (task, slot_id)
    if latest is None:
        return None
    return latest[1], ids


class BackendUnavailable(ConfigError):
    """The backend cannot serve the batch: its warm-up request failed for good (connection
    refused after retries, unknown route or model, rejected credentials, no quota).

    Raised before any agent runs, instead of one failed result per input.

    Attributes:
        url: the URL of the request (``None`` when the model client does not say).
        model: the model name (``None`` when the model client does not say).
        error: the classified failure, with its ``kind`` and HTTP ``status``.
    """

    def __init__(self, url: str | None, model: str | None, error: ModelError) -> None:
        status = f"HTTP {error.status}" if error.status is not None else "no response"
        message = " ".join(error.message.split())
        super().__init__(
            f"the backend cannot serve this batch: warm-up request to {url or 'the backend'} "
            f"(model {model!r}) failed: {status}, {error.kind.value}: {message}"
        )
        self.url = url
        self.model = model
        self.error = error


# Which failures stop the batch is the error table's ``fatal_at_warm_up`` column. A warm-up
# request is a job's own first request, cut to one token: when it cannot connect (after the
# driver's retries), hits no route or model, or is refused credentials or quota, every job
# would fail the same way. Rate limits, overload and server errors may pass; bad requests may
# be specific to the one-token request; so those let the batch start.


def _unavailable(driver: Driver, call: CallModel, error: ModelError) -> BackendUnavailable:
    codec = getattr(driver.client, "codec", None)
    url: str | None = None
    try:
        url = codec.encode(call).url if codec is not None else None
    except Exception:  # naming the URL is a courtesy; the failure is what matters
        url = None
    model = getattr(codec, "model", None)
    return BackendUnavailable(url, model if isinstance(model, str) else None, error)


# ----------------------------------------------------------------------------- I/O


async def warm_up(
    driver: Driver,
    task: Task[Any, Any],
    *,
    batch_id: str,
    strategy: WarmUp,
    opening: str | None = None,
) -> WarmUpReport:
    """Warm the server's cache for ``task`` with ``strategy`` (see the module docstring); the
    warm request's user message is ``opening`` (the text the batch's inputs open with), else
    the template's literal head."""
    if strategy == "off":
        return WarmUpReport("off", "off")
    started = trio.current_time()
    if strategy == "check":
        call = _check_call(batch_id)
    else:
        call = _warm_call(driver, task, batch_id, opening)
    report = await _warm_up(driver, call, strategy)
    return attrs.evolve(report, seconds=trio.current_time() - started)


def tier_unchecked(driver: Driver) -> bool:
    """Whether the driver's requests start on a flex service tier that no answer has yet
    shown the model offers (:mod:`agentcore._transports.tiered`)."""
    return bool(getattr(driver.client, "tier_unchecked", False))


async def check_tier(driver: Driver, task: Task[Any, Any], *, batch_id: str) -> None:
    """Send the warm request when the batch does not warm up but starts on an unchecked flex
    tier: the batch's first request then goes alone, and a model without flex raises
    :class:`~agentcore.ConfigError` here, before the fan-out.

    Raises:
        ConfigError: the flex tier refused the model.
    """
    if tier_unchecked(driver):
        await driver.call_model(_warm_call(driver, task, batch_id))


async def warm_prefix(
    driver: Driver, task: Task[Any, Any], *, batch_id: str
) -> ModelResponded | None:
    """Send the task's shared prefix once, as a one-token request, before the fan-out.

    A prefix-caching server (vLLM, SGLang, Dynamo, sim://) then computes the prefix once
    instead of once per concurrent job. Failure is harmless: the jobs simply start cold.

    Returns:
        The reply, or ``None`` if the request failed.
    """
    reply = await driver.call_model(_warm_call(driver, task, batch_id))
    return reply if isinstance(reply, ModelResponded) else None


def _warm_call(
    driver: Driver, task: Task[Any, Any], batch_id: str, opening: str | None = None
) -> CallModel:
    """The one-token request holding the task's shared prefix, as the driver's jobs send it."""
    return prefix_call(
        task,
        run_id=job_run_id(batch_id, "warm"),
        schema_on_final=driver.schema_on_final,
        opening=opening,
    )


def _check_call(batch_id: str) -> CallModel:
    """The ``check`` warm-up's one-token request: :data:`CHECK_PROMPT`, nothing shared."""
    run_id = job_run_id(batch_id, "check")
    return one_token_call(AgentLoop(LoopConfig(run_id=run_id), [UserMessage(CHECK_PROMPT)]))


async def _warm_up(driver: Driver, call: CallModel, strategy: WarmUp) -> WarmUpReport:
    reply = await driver.call_model(call)
    if not isinstance(reply, ModelResponded):
        if policy_of(reply.error.kind).fatal_at_warm_up:
            raise _unavailable(driver, call, reply.error)
        return WarmUpReport(strategy, "off", detail=f"the warm request failed: {reply.error}")
    if strategy == "check":
        return WarmUpReport("check", "check", reply.usage, 0)
    if strategy == "request":
        return WarmUpReport("request", "request", reply.usage, 1)
    client = driver.client
    if not isinstance(client, HttpModelClient) or not hasattr(client.codec, "base_url"):
        return WarmUpReport("slots", "request", reply.usage, 1, "slot copy needs an HTTP backend")
    try:
        filled, total, detail = await _copy_slots(client, client.codec.base_url)
    except AgentcoreError as exc:
        filled, total, detail = 1, 0, f"slot copy failed: {exc}"
    done: WarmUp = "slots" if filled == total else "request"
    return WarmUpReport("slots", done, reply.usage, filled, detail)


async def _copy_slots(client: HttpModelClient, base_url: str) -> tuple[int, int, str]:
    """Copy the warm slot into every other slot: ``(slots holding the prefix, slots, problem)``."""
    transport = client.transport
    listed = await transport.send(slots_request(base_url), _SLOT_TIMEOUTS)
    if listed.status != 200:
        return 1, 0, f"GET /slots answered {listed.status} (is the server run with --no-slots?)"
    try:
        found = warm_slot(orjson.loads(listed.body))
    except orjson.JSONDecodeError:
        found = None
    if found is None:
        return 1, 0, "GET /slots did not show which slot served the warm request"
    warm, ids = found
    saved = await transport.send(slot_action(base_url, warm, "save"), _SLOT_TIMEOUTS)
    if saved.status != 200:
        text = saved.body[:300].decode("utf-8", "replace")
        return 1, len(ids), f"slot save answered {saved.status} (needs --slot-save-path): {text}"
    filled = 1
    for slot in ids:
        if slot == warm:
            continue
        restored = await transport.send(slot_action(base_url, slot, "restore"), _SLOT_TIMEOUTS)
        if restored.status == 200:
            filled += 1
    if filled < len(ids):
        return filled, len(ids), f"only {filled} of {len(ids)} slots took the prefix"
    return filled, len(ids), ""
