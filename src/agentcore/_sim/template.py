"""The chat template: how a request becomes the prompt text the simulated model reads.

It follows the ChatML layout with a Hermes-style tools block, as Qwen-family templates do:

    <|im_start|>system
    {system prompt}

    # Tools
    <tools>
    {one tool per line, JSON as the client sent it}
    </tools><|im_end|>
    <|im_start|>user
    {content}<|im_end|>
    <|im_start|>assistant
    {content}
    <tool_call>
    {"name": "...", "arguments": ...}
    </tool_call><|im_end|>
    ...
    <|im_start|>assistant

So the system prompt and the tool list come first, byte for byte as sent: clients that keep
them identical across requests share their prefix in the cache. The reply is rendered by the
same function that renders earlier assistant turns, so a reply appended to its prompt is the
next request's prefix when the client sends the turn back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from .request import ChatMessage, ChatRequest, RequestedCall

__all__ = [
    "GENERATION_PROMPT",
    "render_body",
    "render_prompt",
    "render_prompt_parts",
    "render_reply",
]

GENERATION_PROMPT = "<|im_start|>assistant\n"
_END = "<|im_end|>\n"


def _render_calls(calls: Iterable[RequestedCall]) -> str:
    return "\n".join(
        f'<tool_call>\n{{"name": {orjson.dumps(call.name).decode()}, '
        f'"arguments": {call.arguments}}}\n</tool_call>'
        for call in calls
    )


def render_body(content: str, calls: tuple[RequestedCall, ...]) -> str:
    """The text of an assistant turn: its content, then its rendered tool calls."""
    if not calls:
        return content
    rendered = _render_calls(calls)
    return f"{content}\n{rendered}" if content else rendered


def _render_message(message: ChatMessage) -> str:
    return f"<|im_start|>{message.role}\n{render_body(message.content, message.tool_calls)}{_END}"


def render_prompt(request: ChatRequest) -> str:
    """The prompt text of ``request``, ending with the generation prompt."""
    return "".join(render_prompt_parts(request))


def render_prompt_parts(request: ChatRequest) -> list[str]:
    """The prompt text of ``request`` in parts: the system block (with the tools), one part
    per further message, and the generation prompt. Each starts with ``<`` and ends with a
    newline."""
    messages = request.messages
    parts: list[str] = []
    system = ""
    if messages[0].role in ("system", "developer"):
        system, messages = messages[0].content, messages[1:]
    if request.tools:
        tools = "\n".join(tool.rendered for tool in request.tools)
        system = f"{system}\n\n# Tools\n<tools>\n{tools}\n</tools>"
    if system or request.tools:
        parts.append(f"<|im_start|>system\n{system}{_END}")
    parts.extend(_render_message(message) for message in messages)
    parts.append(GENERATION_PROMPT)
    return parts


def render_reply(content: str, calls: tuple[RequestedCall, ...]) -> str:
    """A reply as it appears after the generation prompt, ending the assistant turn."""
    return f"{render_body(content, calls)}{_END}"
