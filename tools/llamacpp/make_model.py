"""Write a llama-architecture GGUF whose answers are known in advance, for llama-server tests.

No weights are downloaded: the tokenizer, the chat template and every tensor are made here
with the ``gguf`` package and numpy (installed into the tools venv by ``build.sh``).

How the answers are fixed
-------------------------
Every transformer block is real (random attention and SwiGLU weights that llama.cpp
computes), but the blocks' output projections are scaled so small that the residual stream
leaving the last block is, to within noise, the embedding of the *current* token. The
embedding rows have RMS 1, so the final RMSNorm leaves them unchanged, and the next-token
logits are ``output @ embedding[current]``: a bigram table designed by hand.

- Column 0 of every embedding is 1: the output matrix's column 0 is a per-token bias, the
  logits a token gets when the current token has no transition of its own. The reply's first
  piece has the highest bias, then JSON punctuation in tiers (``"`` > ``}`` > ``]`` > ``{`` /
  ``</tool_call>`` > ``:`` > ``,`` > ``1`` > end of turn > ``<tool_call>``), 8 logits apart, so a
  grammar that forbids the first choice always gets a valid, short second choice.
- Columns ``1..K`` are one-hot markers of the K tokens with scripted transitions: reply piece
  ``i`` -> piece ``i+1``; the last piece -> end of turn, or where a grammar masks that, a
  backslash-newline-newline marker (legal only outside JSON strings) or else ``"`` (closing a
  JSON string); the marker -> ``<tool_call>`` -> newline, after which llama-server's tool-call
  grammar writes the JSON.
- The remaining columns hold noise (logit noise of about 0.3), so ties never happen.

So a plain chat request answers ``--reply`` and stops; ``tool_choice="required"`` answers the
reply, the marker and one tool call whose string arguments are the reply; a ``json_schema``
request answers valid JSON whose strings are the reply. The model size (``--n-embd``,
``--n-layer``, ``--n-ff``) changes the compute per token, not the answers.

Usage::

    python make_model.py OUT.gguf [--n-embd 128 --n-layer 2 --n-ff 256 ...]
"""

from __future__ import annotations

import argparse
import sys

import gguf
import numpy as np

# Qwen2.5-Instruct's chat template (ChatML, tool calls as Hermes-style <tool_call> JSON),
# which llama-server (--jinja) recognises for OpenAI-style tool calling.
CHAT_TEMPLATE = r"""{%- if tools %}{{- '<|im_start|>system\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}
{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}
{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- elif messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- else %}{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{%- endif %}
{%- for message in messages %}
{%- if message.role == "user" or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == "assistant" %}{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\n<tool_call>\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}{{- tool_call.arguments | tojson }}{{- '}\n</tool_call>' }}
{%- endfor %}{{- '<|im_end|>\n' }}
{%- elif message.role == "tool" %}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != "tool" %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' }}{{- message.content }}{{- '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != "tool" %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""

SPACE = "\u2581"  # SentencePiece's word-start marker
MARKER = "\\\n\n"  # backslash, newline, newline: starts the tool-call path (see the docstring)

# Words the vocabulary holds whole (with every prefix, so SPM merges can build them); any
# other text still tokenizes through the 256 byte-fallback tokens.
COMMON_WORDS = ["a", "about", "after", "again", "all", "also", "always", "an", "and", "answer", "any", "are", "as", "ask", "at", "be", "because", "been", "before", "big", "but", "by", "call", "can", "city", "code", "cold", "count", "data", "day", "did", "do", "does", "done", "each", "error", "false", "file", "final", "find", "first", "for", "from", "get", "give", "go", "good", "great", "has", "have", "he", "hello", "help", "her", "here", "him", "his", "how", "i", "if", "in", "input", "into", "is", "it", "item", "items", "its", "just", "key", "know", "large", "last", "left", "like", "list", "little", "long", "look", "make", "many", "may", "me", "message", "messages", "model", "more", "much", "my", "name", "new", "no", "not", "now", "number", "of", "off", "ok", "old", "on", "one", "only", "or", "other", "our", "out", "output", "over", "part", "people", "please", "plan", "prompt", "query", "question", "read", "reply", "request", "result", "return", "right", "say", "search", "see", "server", "she", "short", "small", "so", "some", "source", "step", "string", "sum", "summary", "system", "take", "task", "test", "than", "thanks", "that", "the", "their", "them", "then", "there", "these", "they", "this", "time", "to", "today", "tool", "tools", "topic", "total", "true", "two", "up", "us", "use", "user", "value", "very", "was", "water", "way", "we", "weather", "well", "were", "what", "when", "where", "which", "who", "why", "will", "with", "word", "work", "world", "would", "write", "yes", "you", "your", "Hello", "Hi", "The", "This", "That", "It", "What", "How", "Why", "When", "Where", "Who", "Yes", "No", "Sure", "Thanks"]

# Token types of the GGUF tokenizer (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


class Vocabulary:
    """An SPM vocabulary under construction: pieces, scores and types, indexed by piece."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.scores: list[float] = []
        self.types: list[int] = []
        self.ids: dict[str, int] = {}

    def add(self, piece: str, score: float = 0.0, kind: int = NORMAL) -> int:
        if piece not in self.ids:
            self.ids[piece] = len(self.pieces)
            self.pieces.append(piece)
            self.scores.append(score)
            self.types.append(kind)
        return self.ids[piece]

    def __getitem__(self, piece: str) -> int:
        return self.ids[piece]

    def __len__(self) -> int:
        return len(self.pieces)


def reply_pieces(reply: str) -> list[str]:
    """The reply as SPM pieces: words (with the word-start marker after the first), and each
    trailing punctuation mark on its own."""
    pieces: list[str] = []
    for position, word in enumerate(reply.split(" ")):
        stem = word.rstrip("!?.,:;")
        if stem:
            pieces.append((SPACE if position else "") + stem)
        pieces.extend(word[len(stem) :])
    if len(set(pieces)) != len(pieces):
        sys.exit(f"every piece of the reply must be distinct, got {pieces}")
    return pieces


def build_vocabulary(reply: list[str]) -> Vocabulary:
    vocab = Vocabulary()
    vocab.add("<unk>", kind=UNKNOWN)
    for control in ("<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        vocab.add(control, kind=CONTROL)
    for tag in ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"):
        vocab.add(tag, kind=USER_DEFINED)
    for tag in ("<tools>", "</tools>"):
        vocab.add(tag, kind=USER_DEFINED)
    for byte in range(256):
        vocab.add(f"<0x{byte:02X}>", kind=BYTE)
    vocab.add(SPACE, -1.0)
    vocab.add(MARKER, -1.0)
    for code in range(0x21, 0x7F):
        vocab.add(chr(code), -1.0)
    words = dict.fromkeys([*COMMON_WORDS, *(p.lstrip(SPACE) for p in reply)])
    for word in words:
        for spelled in (word, SPACE + word):
            for end in range(2, len(spelled) + 1):
                # Longer pieces score higher, so merges prefer whole words.
                vocab.add(spelled[:end], float(end))
    return vocab


def scripted_head(
    vocab: Vocabulary, reply: list[str], n_embd: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The embedding and output matrices of the bigram table (see the module docstring)."""
    ids = [vocab[p] for p in reply]
    end_of_turn = vocab["<|im_end|>"]
    tier = 8.0  # logits between ranked choices: far above the noise, and beyond min_p = 0.05
    bias = {ids[0]: 15 * tier}
    ranked = [('"', 14), ("}", 13), ("]", 12), ("{", 11), ("</tool_call>", 11), (":", 10),
              (",", 9), ("1", 8), ("<|im_end|>", 7), ("<tool_call>", 6)]  # fmt: skip
    for piece, level in ranked:
        bias[vocab[piece]] = level * tier
    strong = 25 * tier
    moves: dict[int, list[tuple[int, float]]] = {
        here: [(after, strong)] for here, after in zip(ids, ids[1:], strict=False)
    }
    moves[ids[-1]] = [
        (end_of_turn, strong - tier),
        (vocab[MARKER], strong - 2 * tier),
        (vocab['"'], strong - 3 * tier),
    ]
    moves[vocab[MARKER]] = [(vocab["<tool_call>"], strong - 2 * tier)]
    moves[vocab["<tool_call>"]] = [(vocab["<0x0A>"], strong - 2 * tier)]

    sources = list(moves)
    noise_from = 1 + len(sources)
    if noise_from + 16 > n_embd:
        sys.exit(f"--n-embd {n_embd} is too small for a reply of {len(reply)} pieces")
    onehot = 8.0
    n_vocab = len(vocab)
    embed = np.zeros((n_vocab, n_embd))
    embed[:, 0] = 1.0
    embed[:, noise_from:] = rng.normal(0.0, 1.0, (n_vocab, n_embd - noise_from))
    for column, token in enumerate(sources, start=1):
        embed[token, column] = onehot
    # Scale each row's noise so the row's mean square is exactly 1 (RMSNorm is then a no-op).
    fixed = (embed[:, :noise_from] ** 2).sum(axis=1)
    noise = np.linalg.norm(embed[:, noise_from:], axis=1)
    embed[:, noise_from:] *= (np.sqrt(n_embd - fixed) / noise)[:, None]

    output = np.zeros((n_vocab, n_embd))
    output[:, noise_from:] = rng.normal(0.0, 0.3 / np.sqrt(n_embd - noise_from),
                                        (n_vocab, n_embd - noise_from))  # fmt: skip
    for token, value in bias.items():
        output[token, 0] = value
    for column, token in enumerate(sources, start=1):
        for after, logit in moves[token]:
            output[after, column] += (logit - bias.get(after, 0.0)) / onehot

    # Check the table: from every token, the designed choices rank first, in order.
    logits = embed @ output.T
    for token in range(n_vocab):
        want = [after for after, _ in moves.get(token, [(ids[0], 0.0)])]
        got = list(np.argsort(-logits[token])[: len(want)])
        if got != want:
            sys.exit(f"bigram table check failed at {vocab.pieces[token]!r}")
    return embed.astype(np.float32), output.astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the .gguf file to write")
    parser.add_argument("--reply", default="Hello! I am a tiny test model.")
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-head-kv", type=int, default=2)
    parser.add_argument("--n-ff", type=int, default=256)
    parser.add_argument("--ctx", type=int, default=16384, help="trained context length")
    parser.add_argument("--f16", action="store_true", help="block weights in float16")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    reply = reply_pieces(args.reply)
    vocab = build_vocabulary(reply)
    n_embd, n_ff = args.n_embd, args.n_ff
    head_dim = n_embd // args.n_head
    kv_dim = head_dim * args.n_head_kv
    embed, output = scripted_head(vocab, reply, n_embd, rng)

    block_type = np.float16 if args.f16 else np.float32
    small = 0.1 / n_embd  # the blocks' share of the residual stream

    def weights(std: float, rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(block_type)

    writer = gguf.GGUFWriter(args.out, arch="llama")
    writer.add_name(f"agentcore-scripted-{n_embd}x{args.n_layer}")
    writer.add_context_length(args.ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(args.n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(args.n_head)
    writer.add_head_count_kv(args.n_head_kv)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(len(vocab))
    writer.add_file_type(
        gguf.LlamaFileType.MOSTLY_F16 if args.f16 else gguf.LlamaFileType.ALL_F32
    )
    writer.add_tokenizer_model("llama")
    writer.add_token_list(vocab.pieces)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    writer.add_bos_token_id(vocab["<s>"])
    writer.add_eos_token_id(vocab["<|im_end|>"])
    writer.add_unk_token_id(vocab["<unk>"])
    writer.add_pad_token_id(vocab["<|endoftext|>"])
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    writer.add_tensor("token_embd.weight", embed)
    writer.add_tensor("output.weight", output)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    params = embed.size + output.size
    for layer in range(args.n_layer):
        tensors = {
            "attn_norm.weight": np.ones(n_embd, dtype=np.float32),
            "ffn_norm.weight": np.ones(n_embd, dtype=np.float32),
            "attn_q.weight": weights(0.02, n_embd, n_embd),
            "attn_k.weight": weights(0.02, kv_dim, n_embd),
            "attn_v.weight": weights(0.02, kv_dim, n_embd),
            "attn_output.weight": weights(small, n_embd, n_embd),
            "ffn_gate.weight": weights(0.02, n_ff, n_embd),
            "ffn_up.weight": weights(0.02, n_ff, n_embd),
            "ffn_down.weight": weights(small, n_embd, n_ff),
        }
        for name, tensor in tensors.items():
            writer.add_tensor(f"blk.{layer}.{name}", tensor)
            params += tensor.size
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{args.out}: {params / 1e6:.1f} M parameters, vocabulary {len(vocab)}, reply {reply}")


if __name__ == "__main__":
    main()
