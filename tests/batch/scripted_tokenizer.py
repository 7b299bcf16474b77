"""A scripted chat template and tokenizer, for the block-alignment tests: a request is rendered
the way a Qwen-style template renders it (system prompt, then the tools, then each message,
then the generation prompt) and cut into tokens by simple, stated rules. Also the task and
inputs those tests share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs
import orjson

import agentcore
from agentcore import ModelParams, Task
from agentcore._codecs.openai import OpenAICodec
from agentcore.core import CallModel

CODEC = OpenAICodec(base_url="http://engine/v1", model="m", dialect="vllm")


@agentcore.tool(cache=True)
def search(query: str) -> str:
    """Search the web.

    Args:
        query: what to look up.
    """
    return f"results for {query}"


@attrs.frozen
class Summary:
    text: str


TASK = Task(
    prompt="Summarise the paper {paper} for the section on {topic}.",
    system="You summarise papers. Be brief and exact.",
    tools=[search],
    output=Summary,
    max_turns=1,
    params=ModelParams(tool_choice="required"),
)


def papers(n: int) -> list[dict[str, str]]:
    """Inputs numbered in order, as the benchmarks' are: the first ones share more of their
    opening than the whole list does."""
    return [{"paper": f"arXiv:2501.{10000 + i}", "topic": f"topic {i % 9}"} for i in range(n)]


@attrs.frozen
class ScriptedTokenizer:
    """Renders and tokenizes requests.

    Tokens are words, single digits, single punctuation marks and single whitespace
    characters (so inputs numbered in order share more tokens the closer they are); with
    ``merge_newlines`` a run of newlines is one token per two newlines (rounded up), as BPE
    vocabularies merge them; with ``strip_system`` the template trims the system prompt, as
    some templates do, so whitespace appended to it is dropped.
    """

    merge_newlines: bool = False
    strip_system: bool = False
    calls: list[CallModel] = attrs.field(factory=list, eq=False)
    vocabulary: dict[str, int] = attrs.field(factory=dict, eq=False)

    def render(self, body: dict[str, Any]) -> str:
        """The prompt of a chat request's JSON body (``messages`` and ``tools``)."""
        messages = body["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else "You help."
        if self.strip_system:
            system = system.strip()
        text = "<|system|>\n" + system
        if body.get("tools"):
            text += "\n\n# Tools\n" + "\n".join(orjson.dumps(t).decode() for t in body["tools"])
        text += "<|end|>\n"
        for message in messages[1:] if messages[0]["role"] == "system" else messages:
            text += f"<|{message['role']}|>\n{message.get('content') or ''}<|end|>\n"
        return text + "<|assistant|>\n"

    def tokens(self, text: str) -> list[str]:
        pieces: list[str] = []
        for match in re.finditer(r"<\|\w+\|>|[^\W\d]+|\d|\n+|\s|[^\w\s]", text):
            piece = match.group()
            if piece.startswith("\n"):
                step = 2 if self.merge_newlines else 1
                pieces.extend(piece[i : i + step] for i in range(0, len(piece), step))
            else:
                pieces.append(piece)
        return pieces

    def ids(self, body: dict[str, Any]) -> list[int]:
        """The token ids of a chat request's JSON body."""
        vocabulary = self.vocabulary
        return [vocabulary.setdefault(p, len(vocabulary)) for p in self.tokens(self.render(body))]

    async def __call__(self, call: CallModel) -> list[int] | None:
        self.calls.append(call)
        return self.ids(orjson.loads(CODEC.encode(call).body))


def shared(lists: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every list shares."""
    first = lists[0]
    size = len(first)
    for other in lists[1:]:
        n = 0
        while n < min(size, len(other)) and first[n] == other[n]:
            n += 1
        size = n
    return size
