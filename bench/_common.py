"""Shared pieces of the side-by-side benchmarks.

Standard library only: every contender imports this module, including the BatchAgent runner,
which runs in BatchAgent's own virtual environment without agentcore.

- Workloads: the *research-summary* shape (agents that search a shared topic, then summarise;
  used on Dynamo) and the *lookup* shape (one unique tool call per agent, used against the
  fixed-latency server). A workload is written to a JSON file and read back by each contender,
  so all of them send the same prompts, tools and limits.
- The reply key of a conversation (``search-tN`` on the first turn, ``summary-tN`` after it),
  derived from the conversation itself, and the scripted replies behind the keys: the Dynamo
  mocker replays them, so every contender gets the same answers.
- Measurement: a contender runs in its own subprocess; :func:`run_measured` reports its wall
  time, CPU time and peak RSS from ``wait4``; the contender prints one JSON line with what it
  counted itself.
- Table formatting, medians, and a description of the machine.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import selectors
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
BASELINES = BENCH / "baselines"
STACK_TOOLS = ROOT / "tools" / "dynamo"


class ListeningProcess:
    """A helper process (a server, a proxy) that prints ``listening on PORT`` once it is ready.

    Args:
        argv: its command line.
        what: what to call it if it does not start.
    """

    def __init__(self, argv: Sequence[str], what: str) -> None:
        self.process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the {what} did not start: {line!r}")
        self.port = int(line.split()[-1])

    def stop(self) -> None:
        """Terminate it (kill it after 10 s) and close its output."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def project_python() -> str:
    """The interpreter of the project's virtual environment (agentcore installed)."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def dynamo_stack_module() -> Any:
    """``tools/dynamo/stack.py``, imported (it is not part of the package)."""
    if str(STACK_TOOLS) not in sys.path:
        sys.path.insert(0, str(STACK_TOOLS))
    import stack  # type: ignore[import-not-found]

    return stack


# ---------------------------------------------------------------------------- workloads

TOPICS = (
    "prefix caching for shared prompts",
    "speculative decoding with draft models",
    "kv cache eviction policies",
    "mixture of experts routing",
    "activation quantization",
    "long context attention kernels",
    "tool use by language agents",
    "retrieval augmented generation",
    "disaggregated prefill and decode",
)

_TOPIC_MARK = re.compile(r"Topic: (t\d+)\b")
_RECORD_MARK = re.compile(r"Record: (r\d+)\b")

_GUIDELINES = (
    "Read the abstract, the introduction and the conclusion before anything else",
    "state the problem the paper addresses in one plain sentence",
    "name the baseline the authors compare against and say whether the comparison is fair",
    "report the main quantitative result with its unit and the hardware it was measured on",
    "separate what was measured from what was estimated or simulated",
    "note every assumption that the result depends on",
    "flag results that were obtained on a single workload or a single model size",
    "prefer the authors' own numbers to numbers quoted by other papers",
    "search for independent reproductions before calling a result established",
    "mention negative results and limitations the authors themselves admit",
    "keep the summary neutral: no praise, no dismissal, no speculation about motives",
    "write for an engineer who will decide whether to try the technique next week",
    "use the vocabulary of the field but define every acronym on first use",
    "cite the search results you used by their titles",
    "never invent a citation, a number or an author name",
    "if the search returns nothing useful, say so instead of guessing",
    "keep each summary to one paragraph of at most one hundred and twenty words",
    "end with one sentence on how the paper relates to the survey topic",
)


def research_system_prompt(paragraphs: int = 11) -> str:
    """A deterministic system prompt of roughly 2,000 tokens (on the tiny model's tokenizer)."""
    parts = [
        "You are a research assistant helping to write a survey of recent work on efficient "
        "inference for large language models. You receive one paper at a time and must "
        "produce a short, accurate summary of it for the survey. You may call the web_search "
        "tool to look up the survey topic before you write. Follow these guidelines."
    ]
    for block in range(paragraphs):
        lines = [
            f"Guideline {block + 1}.{n + 1}: {text}."
            for n, text in enumerate(_GUIDELINES[block % 6 :: 3])
        ]
        parts.append(" ".join(lines))
    parts.append(
        "When the summary is ready, reply with the summary text only, without a preamble, "
        "and without calling any further tool."
    )
    return "\n\n".join(parts)


@dataclass
class ToolShape:
    """The one tool every agent of a workload is offered."""

    name: str
    description: str
    parameter: str
    """The tool's single string parameter."""
    latency: float
    """Seconds one execution takes."""


@dataclass
class Workload:
    """Everything a contender needs to run the same batch as the others."""

    kind: str
    """``research`` or ``lookup``."""
    model: str
    system: str
    template: str
    """The user message, ``str.format`` fields filled from each input."""
    inputs: list[dict[str, str]]
    tool: ToolShape
    max_tokens: int
    max_turns: int = 2
    """Tool turns allowed (both contenders offer tools on every turn)."""
    annotate: bool = True
    """Whether requests need ``nvext.annotations`` (Dynamo replay) to get scripted replies."""
    extra: dict[str, Any] = field(default_factory=dict)

    def dump(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self)))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Workload:
        data = json.loads(Path(path).read_text())
        data["tool"] = ToolShape(**data["tool"])
        return cls(**data)

    def user_message(self, index: int) -> str:
        return self.template.format(**self.inputs[index])


def research_workload(n: int, *, topics: int = 9, tool_latency: float = 0.4) -> Workload:
    """The research-summary shape: ``n`` papers over ``topics`` shared survey topics.

    Agent ``i`` summarises paper ``i`` for topic ``i % topics``: it searches the topic (the
    same query as every other agent on that topic), then writes the summary.
    """
    inputs = [
        {"paper": f"arXiv:2501.{10000 + i}", "topic": f"t{i % topics}",
         "topic_name": TOPICS[i % topics % len(TOPICS)]}
        for i in range(n)
    ]  # fmt: skip
    return Workload(
        kind="research",
        model="tiny-mock",
        system=research_system_prompt(),
        template=(
            "Summarise the paper {paper} for the survey section on {topic_name}. Topic: {topic}."
        ),
        inputs=inputs,
        tool=ToolShape(
            name="web_search",
            description="Search the web and return the top results as text.",
            parameter="query",
            latency=tool_latency,
        ),
        max_tokens=256,
    )


def lookup_workload(n: int, *, tool_latency: float = 0.1) -> Workload:
    """The lookup shape: each agent looks up its own record once, then answers."""
    return Workload(
        kind="lookup",
        model="bench-model",
        system="You answer questions about records. Look the record up before you answer.",
        template="What does the registry say about the record? Record: {record}.",
        inputs=[{"record": f"r{i}"} for i in range(n)],
        tool=ToolShape(
            name="lookup",
            description="Look up a record in the registry and return its entry.",
            parameter="key",
            latency=tool_latency,
        ),
        max_tokens=128,
        annotate=False,
    )


def tool_result(tool: str, argument: str) -> str:
    """The deterministic result of one tool execution."""
    if tool == "web_search":
        return (
            f"Top results for {argument!r}: (1) A survey of {argument}, 2025. "
            f"(2) Measuring {argument} on production traffic. "
            f"(3) {argument.capitalize()}: pitfalls and open questions."
        )
    return f"Registry entry for {argument}: status active, owner team-{len(argument) % 7}."


def reply_key(user_texts: Iterable[str], assistant_turns: int) -> str | None:
    """The scripted reply a research conversation gets next, or ``None`` (not scripted).

    The topic comes from the ``Topic: tN`` mark of the user message; the first model turn
    searches, every later one summarises.
    """
    for text in user_texts:
        found = _TOPIC_MARK.search(text)
        if found:
            topic = found.group(1)
            return f"search-{topic}" if assistant_turns == 0 else f"summary-{topic}"
    return None


def reply_key_of_openai_messages(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """:func:`reply_key` of an OpenAI chat ``messages`` list."""
    users = [m.get("content") for m in messages if m.get("role") == "user"]
    assistants = sum(1 for m in messages if m.get("role") == "assistant")
    return reply_key((u for u in users if isinstance(u, str)), assistants)


def research_script(topics: int = 9) -> dict[str, Any]:
    """The scripted replies of the research workload, by key (see :func:`reply_key`)."""
    script: dict[str, Any] = {}
    for t in range(topics):
        name = TOPICS[t % len(TOPICS)]
        script[f"search-t{t}"] = {
            "tool_calls": [{"name": "web_search", "arguments": {"query": name}}]
        }
        script[f"summary-t{t}"] = (
            f"The paper advances {name} with a measured improvement on two production "
            f"workloads; the search results confirm that {name} is an active area, and the "
            "main limitation is that only one model size was evaluated."
        )
    return script


# ---------------------------------------------------------------------------- measurement


@dataclass
class Measured:
    """One contender subprocess: its own report and what the kernel measured."""

    returncode: int
    wall: float
    """Seconds from spawn to exit (interpreter start-up included)."""
    cpu_user: float
    cpu_system: float
    max_rss_mb: float
    report: dict[str, Any]
    """The last JSON object the contender printed (``{}`` if none)."""
    stderr: str

    @property
    def cpu(self) -> float:
        return self.cpu_user + self.cpu_system


def run_measured(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> Measured:
    """Run ``argv`` to completion and measure it: wall time, and the child's own CPU time
    and peak RSS from ``wait4``. The child is killed after ``timeout`` seconds (its report is
    then usually empty and the returncode negative)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
    )
    deadline = started + timeout
    out = bytearray()
    err = bytearray()
    # Read both pipes until EOF without blocking on one of them (the child may write a lot
    # to stderr); then reap with wait4 to get the child's rusage.
    selector = selectors.DefaultSelector()
    assert process.stdout is not None and process.stderr is not None
    selector.register(process.stdout, selectors.EVENT_READ, out)
    selector.register(process.stderr, selectors.EVENT_READ, err)
    killed = False
    while selector.get_map():
        remaining = deadline - time.perf_counter()
        if remaining <= 0 and not killed:
            process.kill()
            killed = True
        for key, _ in selector.select(timeout=max(0.05, min(remaining, 1.0))):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fileobj)
            else:
                key.data.extend(chunk)
    selector.close()
    process.stdout.close()
    process.stderr.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    stderr = err.decode(errors="replace")
    if killed:
        stderr += f"\n[killed after {timeout:.0f} s]"
    return Measured(
        returncode=process.returncode,
        wall=wall,
        cpu_user=usage.ru_utime,
        cpu_system=usage.ru_stime,
        max_rss_mb=usage.ru_maxrss / 1024.0,
        report=last_json(out.decode(errors="replace")),
        stderr=stderr,
    )


def child_report(
    argv: Sequence[str], *, src: str | Path | None = None, timeout: float = 600
) -> dict[str, Any]:
    """Run ``argv`` (with ``PYTHONPATH`` set to ``src`` when given) and return the last JSON
    object it printed; a failing child raises ``CalledProcessError``."""
    env = dict(os.environ, PYTHONPATH=str(src)) if src is not None else None
    done = subprocess.run(
        list(argv), env=env, check=True, capture_output=True, text=True, timeout=timeout
    )
    return last_json(done.stdout)


def baseline_source(rev: str, into: Path) -> str | None:
    """``src`` of ``rev`` of this repository, extracted under ``into``; ``None`` if git cannot."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        print(f"no baseline: git archive {rev} failed: {archive.stderr.decode().strip()}")
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return str(into / "src")


def last_json(text: str) -> dict[str, Any]:
    """The last line of ``text`` that parses as a JSON object."""
    for raw in reversed(text.strip().splitlines()):
        line = raw.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return {}


def emit(report: Mapping[str, Any]) -> None:
    """Print a contender's report as the last line of its output."""
    print(json.dumps(dict(report)), flush=True)


def self_cpu() -> float:
    """CPU seconds this process has used (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in [0, 100]); ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rotations(names: Sequence[str], repeats: int) -> Iterator[tuple[int, str]]:
    """``(repeat, name)`` for every pass of every contender, the order rotated by one per
    repeat so that no contender always runs first (or last)."""
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in [*names[shift:], *names[:shift]]:
            yield repeat, name


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


# ---------------------------------------------------------------------------- output


def fmt(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, columns padded for reading in a terminal."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]  # fmt: skip
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    for row in rows:
        cells = [
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> str:
    """One line describing the machine and the interpreter."""
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


# ---------------------------------------------------------------------------- BatchAgent

BATCHAGENT_VERSION = "0.2.0"


def batchagent_python() -> Path:
    """The interpreter of a virtual environment holding ``batch-agent`` (made on first use).

    It lives beside the Dynamo installation, under ``$AGENTCORE_DYNAMO_HOME`` (default
    ``~/.cache/agentcore-dynamo``), in ``batchagent-VERSION/``, and is made from PyPI with
    ``pip install batch-agent==VERSION``.

    Raises:
        RuntimeError: the installation failed.
    """
    home = Path(
        os.environ.get("AGENTCORE_DYNAMO_HOME") or Path.home() / ".cache" / "agentcore-dynamo"
    )
    venv = home / f"batchagent-{BATCHAGENT_VERSION}"
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import batch_agent, importlib.metadata as m; "
             f"assert m.version('batch-agent') == {BATCHAGENT_VERSION!r}"]  # fmt: skip
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return python
    home.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         f"batch-agent=={BATCHAGENT_VERSION}"],
    ]  # fmt: skip
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing batch-agent failed: {done.stderr[-2000:]}")
    if subprocess.run(check, capture_output=True, check=False).returncode != 0:
        raise RuntimeError("batch-agent was installed but does not import")
    return python


# ---------------------------------------------------------------------------- peer frameworks

PEERS = {
    # name: (the requirement installed, the distribution whose version is checked, the module)
    "pydantic-ai": ("pydantic-ai-slim[openai]==2.68.0", "pydantic-ai-slim", "pydantic_ai"),
    "openai-agents": ("openai-agents==0.24.0", "openai-agents", "agents"),
}


def peer_python(name: str) -> Path:
    """The interpreter of a virtual environment holding the peer framework ``name`` (a key of
    :data:`PEERS`), made on first use with ``pip install REQUIREMENT``.

    The environments live under ``$AGENTCORE_PEERS_HOME`` (default ``~/.cache/agentcore-peers``),
    one per pinned requirement, so the peers never share packages with agentcore or each other.

    Raises:
        RuntimeError: the installation failed.
    """
    requirement, distribution, module = PEERS[name]
    version = requirement.rsplit("==", 1)[1]
    home = Path(
        os.environ.get("AGENTCORE_PEERS_HOME") or Path.home() / ".cache" / "agentcore-peers"
    )
    venv = home / f"{name}-{version}"
    python = venv / "bin" / "python"
    check = [str(python), "-c", f"import {module}, importlib.metadata as m; "
             f"assert m.version({distribution!r}) == {version!r}"]  # fmt: skip
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return python
    home.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing {requirement} failed: {done.stderr[-2000:]}")
    if subprocess.run(check, capture_output=True, check=False).returncode != 0:
        raise RuntimeError(f"{requirement} was installed but does not import")
    return python


def vllm_metrics(port: int) -> dict[str, float]:
    """A vLLM server's Prometheus counters and gauges, summed over their labels except
    ``source`` and ``finished_reason`` (kept as a ``.value`` suffix of the name)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"vllm:(\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$", line)
        if match:
            source = re.search(r'(?:source|finished_reason)="(\w+)"', match.group(2))
            key = match.group(1) + (f".{source.group(1)}" if source else "")
            found[key] = found.get(key, 0.0) + float(match.group(3))
    return found


def vllm_quiet(port: int, limit: float = 120.0) -> dict[str, float]:
    """Wait until a vLLM server runs and queues nothing (a run's leftovers), for ``limit``
    seconds at most; its metrics then."""
    deadline = time.monotonic() + limit
    while True:
        now = vllm_metrics(port)
        idle = now.get("num_requests_running", 0) == 0 and now.get("num_requests_waiting", 0) == 0
        if idle or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def reset_prefix_cache(port: int) -> None:
    """Empty a vLLM server's prefix cache (a server in dev mode: ``--dev``)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/reset_prefix_cache", method="POST", data=b""
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        reply.read()
