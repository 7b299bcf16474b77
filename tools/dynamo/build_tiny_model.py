"""Write a weightless model directory that the Dynamo frontend and mocker can serve.

Run with the Python of the Dynamo virtual environment (it needs ``tokenizers``)::

    $AGENTCORE_DYNAMO_HOME/venv/bin/python tools/dynamo/build_tiny_model.py OUT_DIR

What the two processes read from it:

- the frontend: ``tokenizer.json`` (a byte-level BPE tokenizer), ``tokenizer_config.json``
  (the chat template and the special tokens) and ``generation_config.json`` (stop tokens);
- the mocker: ``config.json`` (layer count, KV heads and head size size its simulated KV
  cache). There are no weights: the mocker never runs a network.

The tokenizer is trained here, in a second or two, on the standard library's own sources, so
the directory can be rebuilt offline. ``<tool_call>`` and ``</tool_call>`` are added as
ordinary (non-special) tokens: the frontend's hermes tool-call parser must see them in the
decoded text. The chat template is ChatML with a Hermes-style tools section in the system
turn, assistant tool calls as ``<tool_call>`` blocks and tool results as
``<tool_response>`` user turns.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

VOCAB_SIZE = 4096
END_OF_TEXT, TURN_START, TURN_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
MARKER = "agentcore-tiny-model"
"""Written last: its presence means the directory is complete."""
TRAINING_FILES = 60
"""How many standard-library modules (sorted by name) the tokenizer is trained on."""

CHAT_TEMPLATE = "".join(
    [
        # System turn: the caller's system prompt, then the tool catalogue when tools exist.
        "{%- set first_is_system = messages and messages[0]['role'] == 'system' -%}",
        "{%- if tools -%}",
        "<|im_start|>system\n",
        "{%- if first_is_system %}{{ messages[0]['content'] }}\n\n{% endif -%}",
        "# Tools\n\nYou can call the functions described inside <tools></tools>:\n<tools>",
        "{%- for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n",
        "To call one, write a JSON object with its name and arguments inside "
        "<tool_call></tool_call> tags.<|im_end|>\n",
        "{%- elif first_is_system -%}",
        "<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n",
        "{%- endif -%}",
        # The conversation.
        "{%- for message in messages -%}",
        "{%- if message['role'] == 'system' -%}",
        "{%- if not loop.first %}<|im_start|>system\n{{ message['content'] }}<|im_end|>\n"
        "{% endif -%}",
        "{%- elif message['role'] == 'tool' -%}",
        "<|im_start|>user\n<tool_response>\n{{ message['content'] }}\n</tool_response><|im_end|>\n",
        "{%- elif message['role'] == 'assistant' and message.get('tool_calls') -%}",
        "<|im_start|>assistant\n{{ message['content'] or '' }}",
        "{%- for call in message['tool_calls'] -%}",
        "{%- set arguments = call['function']['arguments'] -%}",
        '\n<tool_call>\n{"name": "{{ call[\'function\'][\'name\'] }}", "arguments": ',
        "{{ arguments if arguments is string else (arguments | tojson) }}}\n</tool_call>",
        "{%- endfor -%}",
        "<|im_end|>\n",
        "{%- else -%}",
        "<|im_start|>{{ message['role'] }}\n{{ message['content'] or '' }}<|im_end|>\n",
        "{%- endif -%}",
        "{%- endfor -%}",
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}",
    ]
)


def train_tokenizer() -> Tokenizer:
    """A byte-level BPE tokenizer trained on standard-library sources."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    corpus = [str(p) for p in sorted(stdlib.glob("*.py"))[:TRAINING_FILES]]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[END_OF_TEXT, TURN_START, TURN_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train(corpus, trainer)
    tokenizer.add_tokens(
        [AddedToken(tag, special=False, normalized=False) for tag in (CALL_OPEN, CALL_CLOSE)]
    )
    return tokenizer


def write_model(out: Path) -> dict[str, int]:
    """Write the model directory; return the ids of the special and tool tokens."""
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer()
    tokenizer.save(str(out / "tokenizer.json"))
    specials = (END_OF_TEXT, TURN_START, TURN_END)
    ids = {token: tokenizer.token_to_id(token) for token in (*specials, CALL_OPEN, CALL_CLOSE)}
    added = {
        str(token_id): {
            "content": token,
            "special": token in specials,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "single_word": False,
        }
        for token, token_id in ids.items()
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
        "bos_token": None,
        "eos_token": TURN_END,
        "pad_token": END_OF_TEXT,
        "unk_token": None,
        "add_bos_token": False,
        "model_max_length": 32768,
        "added_tokens_decoder": added,
    }
    # Shaped like a very small Qwen2: the mocker sizes its KV cache from these numbers.
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": tokenizer.get_vocab_size(),
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "bos_token_id": ids[END_OF_TEXT],
        "eos_token_id": ids[TURN_END],
    }
    generation = {
        "bos_token_id": ids[END_OF_TEXT],
        "eos_token_id": [ids[TURN_END], ids[END_OF_TEXT]],
    }
    for name, value in (
        ("tokenizer_config.json", tokenizer_config),
        ("config.json", config),
        ("generation_config.json", generation),
    ):
        (out / name).write_text(json.dumps(value, indent=1) + "\n")
    (out / MARKER).write_text("built by tools/dynamo/build_tiny_model.py\n")
    return ids


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: build_tiny_model.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    ids = write_model(out)
    print(f"tiny model written to {out} (token ids {ids})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
