"""Write a tiny Qwen2-architecture chat model for the vLLM tier, built here from nothing.

    python tools/vllm/make_model.py OUT_DIR [--hidden 128] [--layers 2] [--heads 4] [--random]

The model directory holds a byte-level BPE tokenizer (trained in a second on the corpus
below, with ChatML's special tokens and the hermes ``<tool_call>`` tags), a Qwen2.5-style chat
template that renders tools, tool calls and tool results, and safetensors weights. Runs with
the torch, transformers and tokenizers of the vLLM venv (``tools/vllm/setup.sh``).

Scripted weights (the default) make greedy decoding predictable: the attention and MLP
outputs are zeroed (``o_proj`` and ``down_proj``; the other projections keep their random
values, so the engine's kernels, KV cache and prefix cache still do real work), which leaves
the logits a function of the current token alone, a bigram table written by hand:

- after the generation prompt (``<|im_start|>assistant\\n``) the model says :data:`REPLY`, then
  ``<|im_end|>``;
- anywhere else it prefers, in this order, ``<|im_end|>``, ``"``, ``}``, ``]``, ``0``, ``,``,
  ``:``, ``{``, ``[``, then every other token by id, whitespace last. Under a grammar (a forced
  tool call, ``response_format``) that closes every string, array and object as soon as the
  grammar allows: a tool call with ``{"query": ""}``, an object ``{"text": ""}``.

So the model never calls a tool unless the request forces one (``tool_choice="required"`` or a
named tool); its first reply token is not ``<tool_call>``. ``--random`` keeps transformers'
random initialisation instead (noise, for load tests).
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

REPLY = "Hello from the tiny model."
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TAGS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")
PREFERRED = ("<|im_end|>", '"', "}", "]", "0", ",", ":", "{", "[")
CONTEXT = 8192

CORPUS = """\
Hello from the tiny model. The assistant reads the question, calls a tool when it has to,
and answers in one short message. Summarise the paper for the survey section on the topic.
You are a research assistant helping to write a survey of recent work on efficient inference.
Guideline: read the abstract, the introduction and the conclusion before anything else.
{"name": "web_search", "arguments": {"query": "prefix caching"}}
{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9] true false null 0.25 -3 42 2048
# Tools
You may call one or more functions to assist with the user query.
You are provided with function signatures within XML tags.
For each function call, return a json object with function name and arguments.
system user assistant tool function name arguments content description parameters
Search the notes and return what they say about tides, comets, glaciers, volcanoes and owls.
"""


def chat_template() -> str:
    """ChatML with hermes tool calls, the layout of Qwen2.5's template."""
    tools_head = (
        "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query."
        "\\n\\nYou are provided with function signatures within <tools></tools> XML tags:"
        "\\n<tools>"
    )
    tools_tail = (
        "\\n</tools>\\n\\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
        '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>'
    )
    parts = [
        "{%- set first_system = messages and messages[0].role == 'system' %}",
        "{{- '<|im_start|>system\\n' }}",
        "{%- if first_system %}{{- messages[0].content }}",
        "{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}",
        "{%- if tools %}",
        f"{{{{- '{tools_head}' }}}}",
        "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}",
        f'{{{{- "{tools_tail}" }}}}',
        "{%- endif %}",
        "{{- '<|im_end|>\\n' }}",
        "{%- for message in messages %}",
        "{%- if loop.first and first_system %}",
        "{%- elif message.role == 'assistant' and message.tool_calls %}",
        "{{- '<|im_start|>assistant' }}",
        "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}",
        "{%- for call in message.tool_calls %}",
        "{%- set fn = call.function if call.function is defined else call %}",
        '{{- \'\\n<tool_call>\\n{"name": "\' + fn.name + \'", "arguments": \' }}',
        "{%- if fn.arguments is string %}{{- fn.arguments }}",
        "{%- else %}{{- fn.arguments | tojson }}{%- endif %}",
        "{{- '}\\n</tool_call>' }}",
        "{%- endfor %}",
        "{{- '<|im_end|>\\n' }}",
        "{%- elif message.role == 'tool' %}",
        "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}",
        "{{- '<|im_start|>user' }}{%- endif %}",
        "{{- '\\n<tool_response>\\n' + (message.content or '') + '\\n</tool_response>' }}",
        "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}",
        "{{- '<|im_end|>\\n' }}{%- endif %}",
        "{%- else %}",
        "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}",
        "{%- endif %}",
        "{%- endfor %}",
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
    ]
    return "".join(parts)


def tokenizer(out: Path, vocab: int) -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        [CORPUS] * 8,
        trainer=trainers.BpeTrainer(
            vocab_size=vocab,
            special_tokens=list(SPECIAL),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    # The tool tags are plain added tokens (not special), as in Qwen2.5, so they survive decoding.
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL),
        model_max_length=CONTEXT,
    )
    fast.chat_template = chat_template()
    fast.save_pretrained(str(out))
    return fast


def single_token(tok: PreTrainedTokenizerFast, text: str) -> int | None:
    if text in SPECIAL:
        return int(tok.convert_tokens_to_ids(text))
    ids = tok.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def script(model: Qwen2ForCausalLM, tok: PreTrainedTokenizerFast, hidden: int) -> None:
    """Hand-set embeddings and head: channel 0 carries the ranking, channel i the i-th reply
    step (the embedding of the i-th chain token switches it on, the head maps it to the next)."""
    rows = model.lm_head.weight.shape[0]
    size = len(tok)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "x"}], add_generation_prompt=True, tokenize=False
    )
    chain = [tok.encode(prompt, add_special_tokens=False)[-1]]
    chain += tok.encode(REPLY, add_special_tokens=False)
    chain.append(int(tok.convert_tokens_to_ids("<|im_end|>")))
    if len(set(chain[:-1])) != len(chain) - 1 or len(chain) >= hidden:
        raise SystemExit("the reply needs distinct tokens and fewer of them than hidden units")

    rank = torch.full((rows,), -40.0)  # padding rows: never chosen
    rank[:size] = -1.0 - torch.arange(size, dtype=torch.float32) / size
    for token in range(size):
        if any(c.isspace() for c in tok.decode([token])):
            rank[token] = -6.0
    for place, text in enumerate(PREFERRED):
        token = single_token(tok, text)
        if token is not None:
            rank[token] = 10.0 - place

    embed = torch.zeros(rows, hidden)
    head = torch.zeros(rows, hidden)
    embed[:, 0] = 1.0
    head[:, 0] = rank
    for step, (current, following) in enumerate(itertools.pairwise(chain), start=1):
        embed[current, step] = 1.0
        head[following, step] = 100.0
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(embed)
        model.lm_head.weight.copy_(head)
        model.model.norm.weight.fill_(1.0)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4, help="head size hidden/heads: 32, 64, ...")
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--random", action="store_true", help="random weights, no script")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(7)
    tok = tokenizer(args.out, args.vocab)
    special: dict[str, Any] = {
        "bos_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
        "eos_token_id": tok.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
    }
    config = Qwen2Config(
        vocab_size=(len(tok) + 63) // 64 * 64,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        head_dim=args.hidden // args.heads,
        max_position_embeddings=CONTEXT,
        tie_word_embeddings=False,
        torch_dtype="float32",
        **special,
    )
    model = Qwen2ForCausalLM(config)
    if not args.random:
        script(model, tok, args.hidden)
    model.save_pretrained(str(args.out), safe_serialization=True)
    generation = {"eos_token_id": [special["eos_token_id"]], "do_sample": False}
    (args.out / "generation_config.json").write_text(json.dumps(generation))

    # Check the script with transformers itself before any server sees the model.
    encoded = tok.apply_chat_template(
        [{"role": "user", "content": "Say hello."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = model.generate(**encoded, max_new_tokens=16, do_sample=False)
    reply = tok.decode(out[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    if not args.random and reply != REPLY:
        raise SystemExit(f"the scripted model says {reply!r}, not {REPLY!r}")
    params = sum(p.numel() for p in model.parameters())
    print(f"{args.out}: {params:,} parameters, vocabulary {len(tok)}, greedy reply {reply!r}")


if __name__ == "__main__":
    main()
