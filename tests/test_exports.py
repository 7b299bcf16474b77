"""The public surface: exactly these names, all defined in private modules, all documented."""

from __future__ import annotations

import inspect
import pkgutil
import types
from typing import Union, get_origin

import agentcore
import agentcore.testing

PUBLIC = {
    # values of the core
    "AgentHints", "AssistantMessage", "Message", "ModelParams", "OutputSpec", "ServerTiming",
    "SystemMessage", "ToolCall", "ToolMessage", "ToolSpec", "Usage", "UserMessage",
    # events and effects
    "Abort", "AbortKind", "AbortReason", "CallModel", "CallTool", "CancelRequested", "Effect",
    "ErrorKind", "Event", "Finish", "ModelError", "ModelFailed", "ModelResponded", "ToolError",
    "ToolFailed", "ToolReturned",
    # the loop
    "AgentLoop", "LoopConfig", "LoopSnapshot", "LoopStatistics", "RunState", "SlotQueue",
    # errors
    "AgentcoreError", "ConfigError", "DecodeError", "InternalError", "LocalProtocolError",
    "RunAborted", "TransportError", "RenderError", "TaskFileError",
    # serialisation
    "dumps", "loads",
    # codecs and backends
    "Backend", "HttpRequest", "HttpResponse", "SSEDecoder", "SSEEvent", "Timeouts", "backend",
    # tools
    "Tool", "tool", "ToolExecutorStatistics", "ToolStatistics",
    # driver
    "Driver", "DriverStatistics", "Exchange", "ModelClient", "RequestStats", "Result",
    "ResultStream", "RetryPolicy", "RunTimings", "SlotStatistics", "Summary", "open_driver",
    # batch layer
    "BatchStream", "MapReduceResult", "Task", "load_task", "map_reduce", "open_batch",
    "run_batch", "warm_prefix",
    # simulated backend
    "SimConfig", "SimServer", "SimStatistics", "open_sim_server",
    # distributed batches
    "QueueAddress", "SubmitReport", "WorkerStatistics", "run_worker", "submit_batch",
}  # fmt: skip

TESTING = {"Reply", "ScriptedModel", "VirtualRun", "run_in_virtual_time"}


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def test_the_public_surface_is_exactly_the_documented_names() -> None:
    names = _public(agentcore) - {"annotations"}
    assert names - PUBLIC == set(), "new public names: add them here deliberately"
    assert PUBLIC - names == set(), "public names went missing"


def test_every_public_object_lives_in_a_private_module() -> None:
    for name in PUBLIC:
        value = getattr(agentcore, name)
        if isinstance(value, types.UnionType) or get_origin(value) is Union:
            continue  # Message, Event, Effect, ...: unions of public classes
        module = getattr(value, "__module__", "")
        assert module.startswith("agentcore._"), f"{name} is defined in {module!r}"


def test_every_public_class_and_function_has_a_docstring() -> None:
    for name in PUBLIC | {f"testing.{n}" for n in TESTING}:
        holder = agentcore.testing if name.startswith("testing.") else agentcore
        value = getattr(holder, name.removeprefix("testing."))
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name} has no docstring"


def test_the_testing_kit_exports_its_documented_names() -> None:
    assert set(agentcore.testing.__all__) == TESTING
    for name in TESTING:
        assert hasattr(agentcore.testing, name)


def test_only_the_package_and_the_testing_kit_are_public_modules() -> None:
    public = [
        info.name
        for info in pkgutil.walk_packages(agentcore.__path__, "agentcore.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
    assert sorted(public) == ["agentcore.testing", "agentcore.testing.strategies"]
