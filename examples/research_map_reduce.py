"""Research map-reduce: plan sub-questions, research each one, then write a synthesis.

python examples/research_map_reduce.py "How do inference servers reuse prompt prefixes?"
"""

from __future__ import annotations

import argparse
import sys

import attrs
import trio

import agentcore


@agentcore.tool(coalesce=True, timeout=10)
async def search(query: str, k: int = 3) -> str:
    """Search the reference library.

    Args:
        query: search terms.
        k: number of hits to return.
    """
    await trio.sleep(0.2)  # a remote search service
    return "\n".join(f"[{i + 1}] result for '{query}'" for i in range(max(1, min(k, 5))))


@attrs.frozen
class Plan:
    questions: list[str]


@attrs.frozen
class Finding:
    question: str
    answer: str
    sources: list[str]


@attrs.frozen
class Synthesis:
    title: str
    summary: str
    open_questions: list[str]


PLAN = agentcore.Task(
    system="You plan research. Split the question into three to six focused sub-questions.",
    prompt="Plan research on this question:\n\n{input}",
    output=Plan,
    max_turns=1,
)
MAP = agentcore.Task(
    system="You research one focused question with the search tool and cite sources.",
    prompt="Research this sub-question:\n\n{input}",
    tools=[search],
    output=Finding,
    max_turns=3,
)
REDUCE = agentcore.Task(
    system="You write concise research syntheses from findings.",
    prompt=(
        "Write a synthesis answering: {input}\n\nFindings (JSON):\n{answers}\n\n"
        "Sub-questions that could not be researched: {failed}"
    ),
    output=Synthesis,
    max_turns=1,
)


async def main(question: str, backend: str, model: str) -> int:
    plan, answers, summary = await agentcore.map_reduce(
        plan=PLAN, map=MAP, reduce=REDUCE, input=question, backend=backend, model=model
    )
    if plan.status != "ok" or summary is None:
        print(f"planning failed: {plan.error}")
        return 1
    print(
        f"planned {len(answers)} sub-questions; {sum(a.status == 'ok' for a in answers)} researched"
    )
    print(f"{summary.status}: {summary.output if summary.status == 'ok' else summary.error}")
    return 0 if summary.status == "ok" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", nargs="?", default="How do servers reuse prompt prefixes?")
    parser.add_argument("--backend", default="sim://")
    parser.add_argument("--model", default="sim")
    args = parser.parse_args()
    sys.exit(trio.run(main, args.question, args.backend, args.model))
