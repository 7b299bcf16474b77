"""Every Python example of README.md and docs/*.md runs in the suite, or says why it cannot.

An example is a ```` ```python ```` block. The line before it may say how it is checked:

- nothing: this module runs it. The blocks of one document run in order in one namespace (a
  later block uses what an earlier one defined), after the document's *given* names below
  (what its prose assumes the reader has: a task, inputs, a loop). A block with a top-level
  ``await`` or ``async with`` runs in a trio run of its own; every backend URL it passes to
  ``open_driver``, ``wire.backend``, ``Fallback``, ``fallback=`` or ``backend=`` is sent to one
  ``agentcore sim`` process instead, keeping its scheme where the simulator speaks it
  (``vllm://``, ``dynamo://``, ``openai-batch://``...; ``openai://`` becomes the simulator's
  OpenAI-compatible URL and ``anthropic://`` its Anthropic Messages endpoint). A function
  defined at the top of a block that no block calls is called here: without arguments, or
  with an autojumping clock if it takes ``autojump_clock``, or by the document's *then* code
  below; defining a function is not mistaken for running it.
- ``<!-- example: run by tests/PATH -->``: that guide's test runs it (and checks what it
  prints); checked here: the file exists and reads this document.
- ``<!-- example: needs WHAT -->``: it needs what no test may assume (a cloud account, a Redis
  server, an MCP server program); checked here: it compiles, and every keyword it passes to an
  agentcore callable is a parameter of that callable. (Its names are checked by
  ``tests/test_doc_names.py``, like every block's.)

No block is skipped silently: a block with no marker that cannot run fails here.
"""

from __future__ import annotations

import ast
import inspect
import io
import logging
import pathlib
import re
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from typing import Any

import pytest
import trio
import trio.testing

import agentcore
from tests.sim_process import sim_process

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

_BLOCK = re.compile(r"(?:<!-- example: (?P<mark>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_TAKES_URL = frozenset({"open_driver", "backend", "Fallback"})
"""Callables whose first positional argument is a backend URL."""


class Block:
    """One Python example: its document, line, marker and code."""

    def __init__(self, doc: pathlib.Path, line: int, mark: str | None, code: str) -> None:
        self.doc, self.line, self.mark, self.code = doc, line, mark, code

    @property
    def where(self) -> str:
        return f"{self.doc.name}:{self.line}"


def blocks_of(doc: pathlib.Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    return [
        Block(doc, text.count("\n", 0, m.start("code")) + 1, m.group("mark"), m.group("code"))
        for m in _BLOCK.finditer(text)
    ]


ALL_BLOCKS = [block for doc in DOCS for block in blocks_of(doc)]


# ----------------------------------------------------------------------------- given names

GIVEN: dict[str, str] = {
    # The names each document's prose assumes, as a reader would have them.
    "README.md": "",
    "backends.md": """
import pathlib, tempfile
from agentcore.core import Image
_pictures = pathlib.Path(tempfile.mkdtemp())
paths = []
for _n in range(2):
    (_pictures / f"{_n}.jpg").write_bytes(b"\\xff\\xd8\\xff" + bytes([_n]) * 64)
    paths.append(_pictures / f"{_n}.jpg")
""",
    "batch.md": """
import agentcore

@agentcore.tool
def search(query: str) -> str:
    '''Search the notes. Args: query: what to look for.'''
    return "nothing about " + query

inputs = [{"path": "a.py"}, {"path": "b.py"}]
plan_task = agentcore.Task(prompt="List the parts of: {input}", output=list[str])
map_task = agentcore.Task(prompt="Describe the part {item} of {input}")
reduce_task = agentcore.Task(prompt="Sum up {answers} ({failed} failed) for {input}")
question = "a bicycle"

@agentcore.tool
def lookup(order: str) -> str:
    '''Look an order up. Args: order: the order id.'''
    return order + ": shipped"

@agentcore.tool
def refund(order: str) -> str:
    '''Refund an order. Args: order: the order id.'''
    return order + ": refunded"

ticket_text = "Order 4711 never arrived."
""",
    "driver.md": """
import agentcore
from agentcore.core import AgentLoop, LoopConfig, UserMessage

@agentcore.tool
def web_search(query: str) -> str:
    '''Search the web. Args: query: what to look for.'''
    return "results for " + query

def _loop(index):
    config = LoopConfig(run_id=f"doc-{index}", tools=(web_search.spec,))
    return AgentLoop(config, [UserMessage("Look something up.")])

loop = _loop(0)
loops = [_loop(i) for i in range(1, 4)]
task = agentcore.Task(prompt="Look up {topic}.", tools=[web_search])
inputs = [{"topic": "trio"}, {"topic": "h11"}]
""",
    "observability.md": """
import agentcore
task = agentcore.Task(prompt="Review {path}.")
inputs = [{"path": "a.py"}, {"path": "b.py"}]
""",
    "core.md": """
import attrs
from agentcore.core import AgentLoop, AssistantMessage, LoopConfig, ModelResponded, UserMessage

@attrs.frozen
class Report:
    summary: str

tools = ()
messages = [UserMessage("Review a.py.")]
config = LoopConfig(run_id="r1", tools=tools, output=Report)
event = ModelResponded("r1/0", AssistantMessage('{"summary": "fine"}'))
""",
    "services.md": "import agentcore\n",
    "sim.md": "",
    "tools.md": """
import attrs, trio

@attrs.frozen
class Hit:
    url: str
    title: str

class _Sandbox:
    def __init__(self, task):
        self.task = task

    async def run(self, path):
        await trio.sleep(0)
        return f"{path}: 3 passed"

def sandbox_for(task):
    return _Sandbox(task)

tasks = ["fix-parser", "add-cache"]

@attrs.frozen
class _Refund:
    id: str
    cents: int

class Payments:
    def __init__(self):
        self.refunds = {}

    async def refund(self, order, cents, idempotency_key):
        await trio.sleep(0)
        return self.refunds.setdefault(idempotency_key, _Refund(f"re-{len(self.refunds)}", cents))

async def run_epoch():
    await trio.sleep(0)
""",
}
"""Per document whose examples run here; a document missing from this table has none."""

THEN: dict[str, str] = {
    # Calls of the functions a document defines for the reader to call.
    "core.md": """
from agentcore.core import LoopConfig, ToolSpec, UserMessage
_spec = ToolSpec("add", "Add two numbers.", {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
})
_asked = []

def _model(call):
    if len(call.messages) == 1:
        reply = AssistantMessage(tool_calls=(ToolCall("c1", "add", '{"a": 2, "b": 3}'),))
    else:
        reply = AssistantMessage("5")
    return ModelResponded(call.request_id, reply)

def _tool(name, arguments):
    _asked.append((name, arguments))
    return str(arguments["a"] + arguments["b"])

from agentcore.core import ToolCall
assert run(AgentLoop(LoopConfig(run_id="r2", tools=(_spec,)), [UserMessage("2 + 3?")]),
           _model, _tool) == "5"
assert _asked == [("add", {"a": 2, "b": 3})]
""",
}
"""Per document: code run after its blocks, calling what they define for the reader."""


def _fresh_loops(namespace: dict[str, Any]) -> None:
    # A loop runs once: an example that runs ``loop`` twice gets a fresh one each time.
    if "_loop" in namespace:
        namespace["loop"] = namespace["_loop"](0)
        namespace["loops"] = [namespace["_loop"](i) for i in range(1, 4)]


# ----------------------------------------------------------------------------- URLs


class _ToSimulator(ast.NodeTransformer):
    """Sends the backend URLs of an example to the simulator at ``port``."""

    def __init__(self, port: int) -> None:
        self.port = port

    def url(self, node: ast.expr) -> tuple[ast.expr, bool]:
        """The node with its URL replaced, and whether it now needs ``dialect="anthropic"``."""
        if isinstance(node, ast.Constant) and node.value is Ellipsis:  # "your backend"
            return ast.copy_location(ast.Constant("sim://"), node), False
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return node, False
        scheme, sep, _ = node.value.partition("://")
        if not sep or scheme == "sim":
            return node, False
        here = f"127.0.0.1:{self.port}"
        if scheme in ("vllm", "sglang", "dynamo", "llamacpp", "openai-batch", "anthropic-batch"):
            value = f"{scheme}://{here}"
        elif scheme in ("http", "https", "openai"):
            value = f"http://{here}/v1"
        elif scheme == "anthropic":
            return ast.Constant(f"http://{here}"), True
        else:
            raise AssertionError(f"an example needs {scheme}://: mark it with what it needs")
        return ast.copy_location(ast.Constant(value), node), False

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        anthropic = False
        if name in _TAKES_URL and node.args:
            node.args[0], anthropic = self.url(node.args[0])
        for keyword in node.keywords:
            if keyword.arg == "backend":
                keyword.value, flag = self.url(keyword.value)
                anthropic |= flag
            elif keyword.arg == "fallback" and isinstance(keyword.value, ast.List):
                keyword.value.elts = [self.url(e)[0] for e in keyword.value.elts]
        if anthropic:
            node.keywords.append(ast.keyword("dialect", ast.Constant("anthropic")))
        return node


def _compiled(block: Block, port: int | None) -> Any:
    tree = ast.parse(block.code, filename=block.where)
    if port is not None:
        tree = ast.fix_missing_locations(_ToSimulator(port).visit(tree))
    # ``dont_inherit``: run as written, without this module's ``from __future__`` imports.
    return compile(tree, block.where, "exec", flags=_FLAGS, dont_inherit=True)


# ----------------------------------------------------------------------------- running


def _uncalled(blocks: list[Block], then: str = "") -> list[str]:
    """The functions defined at the top of the blocks that neither a block nor ``then``
    refers to (a decorated one, a tool, is handed to what runs it)."""
    defined: list[str] = []
    used: set[str] = set()
    for code in [*(b.code for b in blocks), then]:
        tree = ast.parse(code)
        defined += [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.decorator_list
        ]
        used |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return [name for name in defined if name not in used]


def _call(function: Any) -> None:
    parameters = list(inspect.signature(function).parameters)
    if not inspect.iscoroutinefunction(function) and not parameters:
        function()
    elif parameters == ["autojump_clock"]:
        clock = trio.testing.MockClock(autojump_threshold=0)
        trio.run(function, clock, clock=clock)
    elif not parameters:
        trio.run(function)
    else:
        raise AssertionError(f"{function.__name__}{parameters}: the runner cannot call it")


@contextmanager
def _logging_kept() -> Iterator[None]:
    """Undo what an example does to the process's logging (``logging.basicConfig``, levels)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    manager = logging.Logger.manager
    levels = {
        name: logger.level
        for name, logger in manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)
        for name, logger in list(manager.loggerDict.items()):
            if isinstance(logger, logging.Logger):
                logger.setLevel(levels.get(name, logging.NOTSET))


def run_document(doc: pathlib.Path, port: int) -> str:
    """Run the unmarked blocks of ``doc`` in order; returns what they printed."""
    blocks = [b for b in blocks_of(doc) if b.mark is None]
    namespace: dict[str, Any] = {"__name__": f"docs_{doc.stem}"}
    out = io.StringIO()
    with redirect_stdout(out), _logging_kept():
        exec(compile(GIVEN[doc.name], f"{doc.name} (given)", "exec", dont_inherit=True), namespace)
        for block in blocks:
            _fresh_loops(namespace)
            code = _compiled(block, port)
            if code.co_flags & inspect.CO_COROUTINE:

                async def body(code: Any = code) -> None:
                    with trio.fail_after(120):
                        await eval(code, namespace)

                trio.run(body)
            else:
                exec(code, namespace)
        then = THEN.get(doc.name, "")
        for name in _uncalled(blocks, then):
            _fresh_loops(namespace)
            _call(namespace[name])
        exec(compile(then, f"{doc.name} (then)", "exec", dont_inherit=True), namespace)
    return out.getvalue()


@pytest.fixture(scope="module")
def simulator_port() -> Iterator[int]:
    with sim_process("--speedup", "50") as url:
        yield int(url.rsplit(":", 1)[1].split("/", 1)[0])


RUN_HERE = sorted({b.doc for b in ALL_BLOCKS if b.mark is None}, key=lambda d: d.name)


@pytest.mark.parametrize("doc", RUN_HERE, ids=lambda d: d.name)
def test_the_examples_of_the_document_run(
    doc: pathlib.Path, simulator_port: int, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    assert doc.name in GIVEN, f"{doc.name}: say what its prose assumes in GIVEN"
    monkeypatch.chdir(tmp_path)  # what the examples write (a batch journal) stays out of the tree
    run_document(doc, simulator_port)


# ----------------------------------------------------------------------------- marked blocks


def _marked(kind: str) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.mark is not None and b.mark.startswith(kind)]


def test_every_marker_is_one_this_runner_knows() -> None:
    unknown = [
        f"{b.where}: {b.mark}"
        for b in ALL_BLOCKS
        if b.mark is not None and not b.mark.startswith(("run by tests/", "needs "))
    ]
    assert unknown == []


@pytest.mark.parametrize("block", _marked("run by "), ids=lambda b: b.where)
def test_a_block_run_by_a_guide_test_names_a_test_that_reads_its_document(block: Block) -> None:
    assert block.mark is not None
    path = ROOT / block.mark.removeprefix("run by ").strip()
    assert path.is_file(), block.mark
    assert block.doc.name in path.read_text(encoding="utf-8"), (block.where, path)


def _callable_at(node: ast.expr) -> Any:
    """The agentcore object ``agentcore.x.y`` names, if the node is such a chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id == "agentcore"):
        return None
    obj: Any = agentcore
    for part in parts:
        obj = getattr(obj, part, None)
    return obj


def unknown_keywords(code: str) -> list[str]:
    """``agentcore.f(name=...)`` calls whose ``name`` is no parameter of ``f``."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, ast.Call):
            continue
        target = _callable_at(node.func)
        if target is None or not callable(target):
            continue
        parameters = inspect.signature(target).parameters
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            continue
        found += [
            f"{ast.unparse(node.func)}({k.arg}=)"
            for k in node.keywords
            if k.arg is not None and k.arg not in parameters
        ]
    return found


@pytest.mark.parametrize("block", _marked("needs "), ids=lambda b: b.where)
def test_a_block_that_needs_a_server_compiles_and_passes_known_keywords(block: Block) -> None:
    _compiled(block, None)
    assert unknown_keywords(block.code) == []


def test_the_keyword_check_sees_a_keyword_the_callable_lacks() -> None:
    assert unknown_keywords("agentcore.UsageLimits(tokens=5)") == ["agentcore.UsageLimits(tokens=)"]
    assert unknown_keywords("agentcore.UsageLimits(total_tokens=5)") == []


def test_the_runner_calls_what_no_block_calls() -> None:
    blocks = [
        Block(ROOT, 1, None, "async def main():\n    pass\n"),
        Block(
            ROOT, 5, None, "async def helper():\n    pass\nasync def other():\n    await helper()\n"
        ),
        Block(ROOT, 9, None, "trio.run(other)\n"),
    ]
    assert _uncalled(blocks) == ["main"]
    assert _uncalled(blocks, then="main()") == []


def test_urls_go_to_the_simulator_keeping_the_dialect() -> None:
    code = (
        'agentcore.open_driver("vllm://gpu:8000", fallback=["openai://", "sim://"])\n'
        'agentcore.run_batch(t, i, backend="anthropic://")\n'
        'agentcore.Task(prompt="see https://example.com")\n'
    )
    tree = _ToSimulator(9).visit(ast.parse(code))
    assert ast.unparse(tree).splitlines() == [
        "agentcore.open_driver('vllm://127.0.0.1:9', fallback=['http://127.0.0.1:9/v1', 'sim://'])",
        "agentcore.run_batch(t, i, backend='http://127.0.0.1:9', dialect='anthropic')",
        "agentcore.Task(prompt='see https://example.com')",
    ]


def test_no_document_is_left_without_its_examples_checked() -> None:
    # Every block is run here, run by a guide, or marked with what it needs.
    assert len(ALL_BLOCKS) > 40
    unchecked = [b.where for b in ALL_BLOCKS if b.mark is None and b.doc.name not in GIVEN]
    assert unchecked == []
