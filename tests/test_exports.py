"""The public surface: one namespace per audience, every public name in exactly one of them.

- ``agentcore``: the batch and driver user (tasks, batches, the driver, tools, result values,
  exceptions);
- ``agentcore.core``: the sans-IO loop and its values, for other runtimes;
- ``agentcore.wire``: HTTP values, codecs, transports, model clients (extension points);
- ``agentcore.sim``: the simulated backend;
- ``agentcore.testing``: the testing kit.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import types

import pytest

import agentcore

NAMESPACES = {
    "agentcore": {
        # errors
        "AgentcoreError", "ConfigError", "DecodeError", "InternalError", "RenderError",
        "TaskFileError", "JournalError", "JournalFull", "JournalLocked", "JournalMismatch",
        # what a run is configured with and ends with
        "ModelParams", "Usage", "AbortKind", "AbortReason", "ErrorKind", "ModelError",
        "ToolError", "Budget", "BudgetExceeded", "UsageLimits", "DEFAULT_FINAL_INSTRUCTION",
        "ERROR_POLICY", "KindPolicy",
        # tools
        "Tool", "tool", "ToolExecutorStatistics", "ToolStatistics", "RunContext",
        "McpServer", "McpToolError", "open_mcp_tools", "ToolExecutor", "open_tool_executor",
        # the driver
        "Driver", "DriverOptions", "open_driver", "Fallback", "FallbackPolicy", "CircuitBreaker",
        "Result",
        "ResultStream", "RunTimings", "Timeouts",
        "RetryPolicy", "SlotStatistics", "DriverStatistics", "RequestStats", "Summary",
        "RateLimiterStatistics", "EstimateError", "RequestShape", "SlotPolicy", "ServiceTier",
        "CostReport", "TierTokens", "TurnCache",
        # the batch layer
        "BatchStream", "MapReduceResult", "map_reduce", "open_batch", "run_batch",
        "warm_prefix", "Task", "load_task", "WarmUpReport", "PrefixAlignment",
        # one-shot generation and step events
        "Generation", "GenerationError", "GenerationStream", "ModelDelta", "ModelReplied",
        "RequestFailed", "RequestQueued", "RequestStarted", "RetryScheduled", "RunAborted",
        "RunFinished", "RunStarted",
        "StepEvent", "StepSink", "StepStream", "ToolEnded", "ToolStarted", "Agent",
        "ToolWaited", "ToolProgress", "HopChanged",
        "BackendUnavailable",
        # seeing what a batch did
        "render_timeline",
        # distributed batches
        "QueueAddress", "SubmitReport", "WorkerStatistics", "run_worker", "submit_batch",
    },
    "agentcore.core": {
        "AgentLoop", "LoopConfig", "LoopSnapshot", "LoopStatistics", "RunState",
        "LocalProtocolError",
        "Abort", "CallModel", "CallTool", "CancelRequested", "Effect", "Event", "Finish",
        "ModelFailed", "ModelResponded", "ToolFailed", "ToolReturned",
        "AgentHints", "AssistantMessage", "Image", "Message", "OutputSpec", "ServerTiming",
        "SystemMessage", "ToolCall", "ToolMessage", "ToolSpec", "UserMessage",
        "SlotQueue", "dumps", "loads",
    },
    "agentcore.wire": {
        "Backend", "BatchSettings", "backend", "Codec", "StreamDecoder", "TextDelta",
        "ToolCallDelta",
        "HttpRequest", "HttpResponse", "SSEDecoder", "SSEEvent", "Exchange", "ModelClient",
        "ResponseStream", "Transport", "TransportError", "TransportErrorKind",
        "StreamingModelClient",
    },
    "agentcore.sim": {
        "SimConfig", "SimServer", "SimStatistics", "open_sim_server", "run_sim_server",
    },
    "agentcore.testing": {
        "Reply", "ScriptedModel", "StreamCut", "VirtualRun", "run_in_virtual_time",
    },
}  # fmt: skip

PUBLIC_MODULES = [n for n in NAMESPACES if n != "agentcore"] + ["agentcore.testing.strategies"]


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


@pytest.mark.parametrize("namespace", list(NAMESPACES))
def test_each_namespace_exports_exactly_its_documented_names(namespace: str) -> None:
    module = _module(namespace)
    assert set(module.__all__) == NAMESPACES[namespace]
    for name in module.__all__:
        assert getattr(module, name) is not None
    ours = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", "").startswith("agentcore")
    }
    assert ours <= NAMESPACES[namespace], "public-looking names missing from __all__"


def test_every_public_name_lives_in_exactly_one_namespace() -> None:
    seen: dict[str, str] = {}
    for namespace, names in NAMESPACES.items():
        for name in names:
            assert name not in seen, f"{name} is exported by {seen[name]} and {namespace}"
            seen[name] = namespace


@pytest.mark.parametrize("namespace", list(NAMESPACES))
def test_public_classes_and_functions_show_their_public_module(namespace: str) -> None:
    module = _module(namespace)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == namespace, f"{namespace}.{name}: {value.__module__}"


@pytest.mark.parametrize("namespace", list(NAMESPACES))
def test_every_public_class_and_function_has_a_docstring(namespace: str) -> None:
    module = _module(namespace)
    assert inspect.getdoc(module)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{namespace}.{name} has no docstring"


def test_the_lazy_table_and_the_type_checking_imports_agree() -> None:
    source = inspect.getsource(agentcore)
    block = source[source.index("if TYPE_CHECKING:") : source.index("__version__")]
    imported = {
        line.split(" as ")[1].strip()
        for line in block.splitlines()
        if line.strip().startswith("from ")
    }
    assert imported == set(agentcore._EXPORTS) == set(agentcore.__all__)


def test_dir_shows_the_public_names_and_namespaces_and_nothing_else() -> None:
    # No helper of the module (importlib, TYPE_CHECKING, Any, annotations) and no private
    # module that loading a name imported (_core, _driver...).
    agentcore.Driver  # noqa: B018 - loads private modules into the package
    assert dir(agentcore) == sorted([*agentcore.__all__, "core", "sim", "testing", "wire"])


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'AgentLoop'"):
        agentcore.AgentLoop  # noqa: B018 - it lives in agentcore.core


def test_only_the_namespaces_are_public_modules() -> None:
    public = [
        info.name
        for info in pkgutil.walk_packages(agentcore.__path__, "agentcore.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
    assert sorted(public) == sorted(PUBLIC_MODULES)


@pytest.mark.parametrize("namespace", ["agentcore", "agentcore.core"])
def test_importing_the_core_surface_imports_no_io_library_nor_the_simulator(
    namespace: str,
) -> None:
    probe = (
        f"import sys, {namespace}\n"
        "heavy = ('trio', 'httpx', 'h11', 'agentcore._sim', 'agentcore._driver.driver')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
