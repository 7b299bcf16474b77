"""The task compiler: templates, the byte-identical shared prefix, and prefix warming."""

from __future__ import annotations

import attrs
import pytest

import agentcore
from agentcore import RenderError, Task
from agentcore._tasks.task import compile_job, prefix_call, render_prompt


@agentcore.tool
def grep(pattern: str, path: str = ".") -> str:
    """Search files.

    Args:
        pattern: regular expression.
        path: where to search.
    """
    return f"{pattern} in {path}"


@attrs.frozen
class Report:
    summary: str
    bugs: int


def _first_call(loop: agentcore.core.AgentLoop) -> agentcore.core.CallModel:
    (call,) = loop.start()
    assert isinstance(call, agentcore.core.CallModel)
    return call


TASK = Task(
    system="You review code.",
    prompt="Review this file carefully.\n\n{source}\n(from {path})",
    tools=[grep],
    output=Report,
)


def test_shared_prefix_is_byte_identical_across_jobs() -> None:
    inputs = [{"source": "x = 1", "path": "a.py"}, {"source": "def f(): pass", "path": "b.py"}]
    calls = [_first_call(compile_job(TASK, v, run_id=f"b-{i}")) for i, v in enumerate(inputs)]
    codec = agentcore.wire.backend("vllm://127.0.0.1:1", model="m").codec
    bodies = [codec.encode(c).body for c in calls]
    shared = TASK.prefix_text
    # Everything up to the per-input text is the same bytes in every request body.
    cut = [b.index(b"x = 1") if b"x = 1" in b else b.index(b"def f()") for b in bodies]
    assert cut[0] == cut[1]
    assert bodies[0][: cut[0]] == bodies[1][: cut[1]]
    assert shared.encode() in bodies[0][: cut[0]].replace(b"\\n", b"\n")


def test_prefix_text_is_the_template_head_with_braces_unescaped() -> None:
    task = Task(prompt="Use {{json}} here: {value} then {other}")
    assert task.prefix_text == "Use {json} here: "


def test_prefix_call_carries_the_same_system_and_tools_as_the_jobs() -> None:
    job = _first_call(compile_job(TASK, {"source": "s", "path": "p"}, run_id="b-0"))
    warm = prefix_call(TASK, run_id="b-warm")
    assert warm.messages[0] == job.messages[0]
    assert warm.tools == job.tools
    assert [t.parameters for t in warm.tools] == [t.parameters for t in job.tools]
    assert warm.params.max_tokens == 1
    assert warm.hints.final is False
    user = warm.messages[-1]
    assert isinstance(user, agentcore.core.UserMessage)
    assert user.content == TASK.prefix_text


def test_a_missing_placeholder_is_a_render_error_naming_it() -> None:
    with pytest.raises(RenderError, match=r"\{path\}"):
        render_prompt(TASK, {"source": "s"})


def test_a_non_mapping_input_fills_the_input_placeholder() -> None:
    assert render_prompt(Task(prompt="Q: {input}"), 42) == "Q: 42"


def test_invalid_templates_and_budgets_are_config_errors() -> None:
    with pytest.raises(agentcore.ConfigError):
        Task(prompt="broken {")
    with pytest.raises(agentcore.ConfigError):
        Task(prompt="attribute {a.b}")
    with pytest.raises(agentcore.ConfigError):
        Task(prompt="x", max_turns=0)
    with pytest.raises(agentcore.ConfigError):
        Task(prompt="x", tools=["not a tool"])  # type: ignore[list-item]


def test_jobs_of_a_task_share_one_system_message_with_the_output_instruction() -> None:
    loops = [
        compile_job(TASK, {"source": f"x = {i}", "path": "a.py"}, run_id=f"b-{i}") for i in range(3)
    ]
    firsts = [loop.transcript[0] for loop in loops]
    assert isinstance(firsts[0], agentcore.core.SystemMessage)
    assert firsts[0].content.startswith("You review code.\n\n")
    assert "JSON schema" in firsts[0].content
    assert all(first is firsts[0] for first in firsts)
    # What is unique per job is the user message.
    assert loops[0].transcript[1] != loops[1].transcript[1]


def test_jobs_without_output_type_share_the_task_system_message() -> None:
    task = Task(system="S" * 4096, prompt="Q {input}")
    a, b = (compile_job(task, i, run_id=f"r-{i}") for i in range(2))
    assert a.transcript[0] is b.transcript[0]
    assert a.transcript[0] == agentcore.core.SystemMessage("S" * 4096)


def test_a_job_keeps_its_own_ids_and_reports_them_in_its_config() -> None:
    loop = compile_job(TASK, {"source": "s", "path": "p"}, run_id="b-7", parent_session_id="b-p")
    config = loop.config
    assert (config.run_id, config.session_id, config.parent_session_id) == ("b-7", "b-7", "b-p")
    assert config == attrs.evolve(
        TASK._base_config, run_id="b-7", session_id="b-7", parent_session_id="b-p"
    )
    call = _first_call(loop)
    assert call.request_id == "b-7/0"
    assert (call.hints.session_id, call.hints.parent_session_id) == ("b-7", "b-p")


def test_a_job_restores_from_its_snapshot_with_its_config() -> None:
    loop = compile_job(TASK, {"source": "s", "path": "p"}, run_id="b-3")
    call = _first_call(loop)
    restored = agentcore.core.AgentLoop.restore(loop.config, loop.snapshot())
    assert restored.outstanding() == (call,)


def test_job_ids_are_checked() -> None:
    with pytest.raises(agentcore.ConfigError):
        compile_job(TASK, {"source": "s", "path": "p"}, run_id="")
    with pytest.raises(agentcore.ConfigError):
        compile_job(TASK, {"source": "s", "path": "p"}, run_id="b-1", parent_session_id="")


@pytest.mark.parametrize("instruction", ["Answer now, no tools.", None])
def test_the_tasks_final_instruction_ends_the_forced_final_request(
    instruction: str | None,
) -> None:
    task = attrs.evolve(TASK, max_turns=1, final_instruction=instruction)
    loop = compile_job(task, {"source": "x = 1", "path": "a.py"}, run_id="r")
    first = _first_call(loop)
    reply = agentcore.core.AssistantMessage(
        tool_calls=(agentcore.core.ToolCall("c0", "grep", '{"pattern": "x"}'),)
    )
    loop.handle(agentcore.core.ModelResponded(first.request_id, reply, agentcore.Usage()))
    (final,) = loop.handle(agentcore.core.ToolReturned("c0", "x in ."))
    assert isinstance(final, agentcore.core.CallModel) and final.hints.final
    last = final.messages[-1]
    if instruction is None:
        assert isinstance(last, agentcore.core.ToolMessage)
    else:
        assert last == agentcore.core.UserMessage(instruction)
