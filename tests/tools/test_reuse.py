"""Results reused across runs only when safe: ``replay_safe`` keys on the declared context
fields (and the tool history when declared); ``cache=True`` is the case with no fields."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import attrs
import orjson
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import agentcore
from agentcore import ConfigError, RunContext
from agentcore._tools.context import history_of
from agentcore._tools.executor import CallReport, open_tool_executor
from agentcore.core import CallTool, ToolReturned


def _context(
    index: int, input: Any = None, deps: Any = None, history: str | None = None
) -> RunContext[Any]:
    return RunContext(
        index=index,
        run_id=f"run{index}",
        session_id=f"run{index}",
        input=input,
        deps=deps,
        history=None if history is None else (lambda: history),
    )


async def _call(
    executor: Any, name: str, arguments: dict[str, Any], context: RunContext[Any]
) -> tuple[str, str]:
    report = CallReport()
    reply = await executor.call(CallTool("c", name, arguments), lambda: context, report)
    assert isinstance(reply, ToolReturned), reply
    return reply.content, report.source


async def test_runs_with_different_deps_never_share_a_result_issue_6903() -> None:
    """The pydantic-ai #6903 shape: two runs whose deps differ call the same tool with the
    same arguments; a key without the deps would hand one run the other's result."""
    executions: list[str] = []

    @agentcore.tool(replay_safe=("deps.user",))
    async def balance(ctx: RunContext[dict[str, str]], account: str) -> str:
        """The balance the user sees. Args: account: the account."""
        executions.append(ctx.deps["user"])
        return f"{ctx.deps['user']}:{account}"

    async with open_tool_executor([balance]) as executor:
        alice = await _call(
            executor, "balance", {"account": "main"}, _context(0, deps={"user": "alice"})
        )
        bob = await _call(
            executor, "balance", {"account": "main"}, _context(1, deps={"user": "bob"})
        )
        alice_again = await _call(
            executor, "balance", {"account": "main"}, _context(2, deps={"user": "alice"})
        )
    assert alice == ("alice:main", "executed")
    assert bob == ("bob:main", "executed")
    assert alice_again == ("alice:main", "cached")  # another run, the same declared fields
    assert executions == ["alice", "bob"]


async def test_a_cached_context_tool_must_declare_what_it_reads() -> None:
    with pytest.raises(ConfigError, match="replay_safe"):

        @agentcore.tool(cache=True)
        async def whoami(ctx: RunContext[Any]) -> str:
            """Who calls."""
            return str(ctx.deps)

    @agentcore.tool(cache=True, replay_safe=())
    async def constant(ctx: RunContext[Any]) -> str:
        """A result that depends on no context field."""
        return "same"

    assert constant.options.replay_safe == ()


@pytest.mark.parametrize(
    "bad", ["input.task", ("nope",), ("deps..x",), ("",), (1,), ("history.x",)]
)
def test_replay_safe_names_context_fields(bad: Any) -> None:
    with pytest.raises(ConfigError):
        agentcore.tool(replay_safe=bad)(lambda x: x)  # type: ignore[arg-type]


def test_replay_safe_implies_cache_and_coalesce_and_is_sorted() -> None:
    @agentcore.tool(replay_safe=["input.task", "deps.user", "input.task"], ttl=5)
    def f(x: int) -> int:
        """F. Args: x: x."""
        return x

    assert f.options.cache and f.options.coalesce
    assert f.options.replay_safe == ("deps.user", "input.task")
    assert agentcore.tool(cache=True)(f.function).options.replay_safe is None


async def test_a_field_without_a_canonical_value_is_never_reused() -> None:
    runs = 0

    @agentcore.tool(replay_safe=("deps",))
    async def read(ctx: RunContext[Any], key: str) -> str:
        """Read. Args: key: k."""
        nonlocal runs
        runs += 1
        return key

    client = object()  # not a JSON value: no key, so no reuse and no sharing
    async with open_tool_executor([read]) as executor:
        for i in range(3):
            assert (await _call(executor, "read", {"key": "k"}, _context(i, deps=client)))[
                1
            ] == "executed"
    assert runs == 3


async def test_a_path_missing_in_a_later_run_gets_no_key() -> None:
    """The first call's input has the field; a later one lacking it runs on its own: two runs
    that both lack a declared field are not known to agree on what the result depends on."""

    @agentcore.tool(replay_safe=("input.task",))
    async def solve(ctx: RunContext[Any], step: int) -> str:
        """Solve. Args: step: s."""
        return orjson.dumps(ctx.input).decode()

    async with open_tool_executor([solve]) as executor:
        first = await _call(executor, "solve", {"step": 1}, _context(0, input={"task": 1}))
        one = await _call(executor, "solve", {"step": 1}, _context(1, input={}))
        two = await _call(executor, "solve", {"step": 1}, _context(2, input={"other": 1}))
        three = await _call(executor, "solve", {"step": 1}, _context(3, input={"task": 1}))
    assert [first[1], one[1], two[1], three[1]] == ["executed", "executed", "executed", "cached"]
    assert two[0] == '{"other":1}'  # not the result of the other run that lacked the task


@attrs.frozen
class AccountAttrs:
    user_id: int
    region: str


@dataclasses.dataclass
class AccountDataclass:
    user_id: int
    region: str


class AccountDict(TypedDict):
    user_id: int
    region: str


@attrs.frozen
class Session:
    account: AccountAttrs


@pytest.mark.parametrize("deps", [AccountAttrs, AccountDataclass, AccountDict])
def test_a_typo_in_a_path_into_typed_deps_is_refused_when_the_tool_is_made(deps: Any) -> None:
    def balance(ctx: RunContext[Any], account: str) -> str:
        """The balance. Args: account: the account."""
        return account

    balance.__annotations__["ctx"] = RunContext[deps]
    with pytest.raises(ConfigError) as refused:
        agentcore.tool(replay_safe=("deps.userid",))(balance)
    message = str(refused.value)
    assert "'deps.userid' leads nowhere" in message
    assert f"deps is a {deps.__qualname__}, which has no field 'userid'" in message
    assert "(its fields: user_id, region)" in message
    assert agentcore.tool(replay_safe=("deps.user_id",))(balance).options.replay_safe


def test_a_typo_deeper_in_typed_deps_and_a_path_into_a_scalar_field_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"deps.account is a AccountAttrs, which has no field"):

        @agentcore.tool(replay_safe=("deps.account.userid",))
        async def balance(ctx: RunContext[Session], account: str) -> str:
            """The balance. Args: account: the account."""
            return account

    with pytest.raises(ConfigError, match="index is a int, with no field 'user'"):

        @agentcore.tool(replay_safe=("index.user",))
        async def other(ctx: RunContext[Session], account: str) -> str:
            """Other. Args: account: the account."""
            return account


def test_a_typo_in_a_path_into_pydantic_deps_is_refused_when_the_tool_is_made() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Account(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        user_id: int

    def balance(ctx: RunContext[Any], account: str) -> str:
        """The balance. Args: account: the account."""
        return account

    balance.__annotations__["ctx"] = RunContext[Account]
    with pytest.raises(ConfigError, match=r"no field 'userid' \(its fields: user_id\)"):
        agentcore.tool(replay_safe=("deps.userid",))(balance)


async def test_a_path_that_leads_nowhere_in_the_first_call_is_refused_naming_what_is_there() -> (
    None
):
    @agentcore.tool(replay_safe=("deps.userid",))
    async def balance(ctx: RunContext[Any], account: str) -> str:
        """The balance. Args: account: the account."""
        return str(ctx.deps)

    @agentcore.tool(replay_safe=("input.user",))
    async def lookup(ctx: RunContext[Any], term: str) -> str:
        """Look up. Args: term: t."""
        return term

    async with open_tool_executor([balance, lookup]) as executor:
        with pytest.raises(ConfigError) as typo:
            await executor.call(
                CallTool("c", "balance", {"account": "main"}),
                lambda: _context(0, deps={"user_id": 1, "name": "a"}),
            )
        with pytest.raises(ConfigError) as plain:
            await executor.call(CallTool("c", "lookup", {"term": "x"}), lambda: _context(0, "q"))
    assert "'deps.userid' leads nowhere" in str(typo.value)
    assert "deps is a mapping without the key 'userid' (its keys: user_id, name)" in str(typo.value)
    assert "input is a str, which has no field 'user'" in str(plain.value)
    assert executor.statistics().executions == 0


async def test_a_batch_of_plain_string_inputs_with_an_input_path_stops_before_any_tool_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from agentcore import Task, run_batch
    from agentcore.testing import ScriptedModel
    from tests.driver.helpers import tool_then_answer

    balances: list[str] = []

    @agentcore.tool(replay_safe=("input.user",))
    async def balance(ctx: RunContext[Any], account: str) -> str:
        """The balance. Args: account: the account."""
        balances.append(str(ctx.input))
        return f"balance of {ctx.input}"

    model = ScriptedModel(tool_then_answer("balance", lambda call: {"account": "main"}))
    task = Task(prompt="{input}", tools=[balance])
    with pytest.raises(ConfigError, match=r"'input\.user' leads nowhere"):
        await run_batch(task, ["user-1", "user-2"], backend=model)
    assert balances == []
    assert model.calls == []  # checked before the first request


async def test_coalescing_a_tool_that_takes_the_context_needs_the_fields_that_key_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(ConfigError, match=r"shares executions \(coalesce=True\): declare"):

        @agentcore.tool(coalesce=True)
        async def unkeyed(ctx: RunContext[Any], account: str) -> str:
            """Balance. Args: account: a."""
            return account

    started: list[str] = []

    @agentcore.tool(coalesce=True, cache=False, replay_safe=("deps.user",))
    async def balance(ctx: RunContext[Any], account: str) -> str:
        """Balance. Args: account: a."""
        started.append(ctx.deps["user"])
        await trio.sleep(1)
        return f"{ctx.deps['user']}:{account}"

    assert not balance.options.cache and balance.options.coalesce
    out: dict[int, tuple[str, str]] = {}
    async with open_tool_executor([balance]) as executor:

        async def one(i: int, user: str) -> None:
            context = _context(i, deps={"user": user})
            out[i] = await _call(executor, "balance", {"account": "main"}, context)

        async with trio.open_nursery() as nursery:
            for i, user in enumerate(["alice", "bob", "alice"]):
                nursery.start_soon(one, i, user)
        later = await _call(
            executor, "balance", {"account": "main"}, _context(3, deps={"user": "alice"})
        )
    # Two concurrent users never share; the same user's concurrent calls do; nothing is kept.
    assert sorted(started) == ["alice", "alice", "bob"]  # the last one after the others
    assert [out[i][0] for i in range(3)] == ["alice:main", "bob:main", "alice:main"]
    assert sorted(out[i][1] for i in range(3)) == ["coalesced", "executed", "executed"]
    assert later == ("alice:main", "executed")


async def test_kept_results_expire_after_their_ttl(autojump_clock: trio.testing.MockClock) -> None:
    runs = 0

    @agentcore.tool(replay_safe=("input",), ttl=10)
    async def look(ctx: RunContext[Any], q: str) -> str:
        """Look. Args: q: q."""
        nonlocal runs
        runs += 1
        return q

    async with open_tool_executor([look]) as executor:
        await _call(executor, "look", {"q": "a"}, _context(0, input=1))
        await trio.sleep(9)
        assert (await _call(executor, "look", {"q": "a"}, _context(1, input=1)))[1] == "cached"
        await trio.sleep(1)
        assert (await _call(executor, "look", {"q": "a"}, _context(2, input=1)))[1] == "executed"
    assert runs == 2


async def test_concurrent_calls_share_one_execution_only_under_the_full_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started: list[Any] = []

    @agentcore.tool(replay_safe=("input.task",))
    async def slow(ctx: RunContext[Any], q: str) -> str:
        """Slow. Args: q: q."""
        started.append(ctx.input["task"])
        await trio.sleep(1)
        return f"{q}@{ctx.input['task']}"

    out: dict[int, tuple[str, str]] = {}
    async with open_tool_executor([slow]) as executor:

        async def one(i: int, task: int) -> None:
            out[i] = await _call(executor, "slow", {"q": "x"}, _context(i, input={"task": task}))

        async with trio.open_nursery() as nursery:
            for i, task in enumerate([1, 2, 1, 2, 1]):
                nursery.start_soon(one, i, task)
    assert sorted(started) == [1, 2]  # one execution per task, not one for all
    assert {i: c for i, (c, _) in out.items()} == {0: "x@1", 1: "x@2", 2: "x@1", 3: "x@2", 4: "x@1"}


# ----------------------------------------------------------------------------- the property

contexts = st.fixed_dictionaries(
    {
        "index": st.integers(0, 3),  # undeclared: may differ between runs that share a result
        "task": st.integers(0, 2) | st.none(),  # None: the input has no task
        "plain": st.booleans(),  # the input is a plain string, not a mapping
        "user": st.sampled_from(["alice", "bob", "Alice"]),
        "history": st.sampled_from(["", "h1", "h2"]),
    }
)
calls = st.lists(
    st.tuples(contexts, st.integers(0, 2) | st.sampled_from([1.0, True])), min_size=1, max_size=25
)
# Declared paths, typos among them (``deps.usr`` never leads anywhere, ``input.tsk`` neither).
declared = st.lists(
    st.sampled_from(["deps.user", "deps.usr", "input.task", "input.tsk"]),
    min_size=1,
    max_size=3,
    unique=True,
)


def _input(context: dict[str, Any]) -> Any:
    if context["plain"]:
        return f"task {context['task']}"
    return {} if context["task"] is None else {"task": context["task"]}


def _lookup(value: Any, part: str) -> Any:
    """The value a path step finds, or ``"?"`` where it leads nowhere (the tool's view)."""
    return value.get(part, "?") if isinstance(value, dict) else "?"


@settings(max_examples=150, deadline=None)
@given(calls=calls, paths=declared, with_history=st.booleans())
def test_no_result_is_ever_reused_across_runs_that_differ_in_a_declared_field(
    calls: list[tuple[dict[str, Any], Any]], paths: list[str], with_history: bool
) -> None:
    """Runs that differ in any declared field (or in history, when it is declared) never get
    each other's result; runs that agree on all of them (whatever their undeclared fields)
    reuse it: the tool runs once per distinct key. A declared path that leads nowhere (a
    typo, a field of a plain-string input) is refused at the first call of each input type,
    before any result is handed out, and a call where it leads nowhere later runs on its
    own."""
    fields = (*paths, *(("history",) if with_history else ()))

    @agentcore.tool(replay_safe=fields)
    async def truth(ctx: RunContext[Any], x: Any) -> str:
        """The answer is a function of the declared fields only. Args: x: anything."""
        seen = [x]
        for path in paths:
            head, part = path.split(".")
            seen.append(_lookup(getattr(ctx, head), part))
        if with_history:
            seen.append(history_of(ctx))
        return orjson.dumps(seen).decode()

    async def main() -> None:
        checked: set[type] = set()
        keys: set[Any] = set()
        keyless = 0
        async with open_tool_executor([truth]) as executor:
            for context, x in calls:
                value = _input(context)
                deps = {"user": context["user"], "undeclared": context["index"]}
                parts = [
                    _lookup(deps if p.startswith("deps") else value, p.split(".")[1]) for p in paths
                ]
                expected = [x, *parts, *([context["history"]] if with_history else [])]
                ctx = _context(context["index"], input=value, deps=deps, history=context["history"])
                leads = "?" not in parts
                if type(value) not in checked:
                    if not leads:
                        with pytest.raises(ConfigError, match="leads nowhere"):
                            await executor.call(CallTool("c", "truth", {"x": x}), lambda c=ctx: c)
                        break  # refused before anything ran: the batch stops here
                    checked.add(type(value))
                content, _ = await _call(executor, "truth", {"x": x}, ctx)
                assert orjson.loads(content) == expected, "a result was reused where it must not be"
                assert type(orjson.loads(content)[0]) is type(x)  # 1, 1.0 and true kept apart
                if leads:
                    keys.add(orjson.dumps(expected).decode())
                else:
                    keyless += 1
            assert executor.statistics().executions == len(keys) + keyless

    trio.run(main)


# ----------------------------------------------------------------------------- in a driver


def _two_turns(first: str) -> Any:
    """A policy: turn 1 calls ``step(first)``, turn 2 calls ``state()``, then it answers with
    the state it saw."""
    from agentcore.core import AssistantMessage, CallModel, ToolCall, ToolMessage

    def policy(call: CallModel) -> str | AssistantMessage:
        results = [m for m in call.messages if isinstance(m, ToolMessage)]
        if not results:
            return AssistantMessage(
                tool_calls=(ToolCall("a", "step", orjson.dumps({"to": first}).decode()),)
            )
        if len(results) == 1:
            return AssistantMessage(tool_calls=(ToolCall("b", "state", "{}"),))
        return results[-1].content

    return policy


async def test_with_history_declared_runs_that_did_different_things_never_share() -> None:
    """``state`` depends on what the run did before (an environment its earlier calls
    changed): with ``"history"`` declared, only runs with the same earlier calls and results
    share its result."""
    from agentcore import open_driver
    from agentcore.testing import ScriptedModel
    from tests.driver.helpers import make_loop

    env: dict[int, str] = {}

    @agentcore.tool
    async def step(ctx: RunContext[Any], to: str) -> str:
        """Move the run's environment. Args: to: where."""
        env[ctx.index] = to
        return f"moved to {to}"

    @agentcore.tool(replay_safe=("history",))
    async def state(ctx: RunContext[Any]) -> str:
        """Where the run's environment is."""
        return env[ctx.index]

    outputs: dict[int, Any] = {}
    # one driver for the three runs (a kept result outlives its run), each its own policy
    policies = {i: _two_turns(f) for i, f in enumerate(["north", "south", "north"])}

    def policy(call: Any) -> Any:
        return policies[int(call.hints.session_id.rsplit("-", 1)[1])](call)

    async with open_driver(ScriptedModel(policy), tools=[step, state]) as driver:
        for index in range(3):
            result = await driver.run(make_loop(index, [step, state]), index=index)
            outputs[index] = result.output
        stats = driver.executor.statistics().tools["state"]
    assert [outputs[i] for i in range(3)] == ["north", "south", "north"]
    assert (stats.executions, stats.cache_hits) == (2, 1)  # the third run reused the first's
