"""Turn scripted replies into a response-replay file for the Dynamo mocker.

Run with the Python of the Dynamo virtual environment (it needs ``tokenizers``)::

    $AGENTCORE_DYNAMO_HOME/venv/bin/python tools/dynamo/build_replay.py \
        MODEL_DIR SCRIPT.json OUT.jsonl

``SCRIPT.json`` maps a key to a reply. A reply is either a string (assistant text) or
``{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}``, written as one hermes
``<tool_call>`` block per call so that the frontend's tool-call parser returns real OpenAI
``tool_calls``. The mocker (``--response-replay-trace-path OUT.jsonl``) answers a request
carrying ``"nvext": {"annotations": ["output_replay_id:KEY"]}`` with the token ids of KEY's
reply followed by the end-of-turn token. A request with an unknown key gets random tokens.

Each output line is one replay record: ``request_id`` (the key), ``output_token_ids``,
``output_length``, and placeholder ``timestamp``, ``input_length`` and ``hash_ids`` fields
that the replay reader requires but the replies do not depend on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

END_OF_TURN = "<|im_end|>"


def reply_text(reply: Any) -> str:
    """The text the model would produce for one scripted reply."""
    if isinstance(reply, str):
        return reply
    if not isinstance(reply, dict) or not isinstance(reply.get("tool_calls"), list):
        raise ValueError(f"a reply must be a string or {{'tool_calls': [...]}}, got {reply!r}")
    blocks = []
    for call in reply["tool_calls"]:
        payload = {"name": call["name"], "arguments": call.get("arguments", {})}
        blocks.append(f"<tool_call>\n{json.dumps(payload)}\n</tool_call>")
    text = reply.get("content") or ""
    return text + "".join(blocks)


def replay_records(tokenizer: Tokenizer, script: dict[str, Any]) -> list[dict[str, Any]]:
    """One replay record per scripted key, in the script's order."""
    end = tokenizer.token_to_id(END_OF_TURN)
    if end is None:
        raise ValueError(f"the tokenizer has no {END_OF_TURN} token")
    records = []
    for number, (key, reply) in enumerate(script.items()):
        ids = [*tokenizer.encode(reply_text(reply), add_special_tokens=False).ids, end]
        records.append(
            {
                "request_id": key,
                "timestamp": 0,
                "input_length": 64,
                "output_length": len(ids),
                "hash_ids": [number],
                "output_token_ids": ids,
            }
        )
    return records


def main() -> int:
    if len(sys.argv) != 4:
        print("usage: build_replay.py MODEL_DIR SCRIPT.json OUT.jsonl", file=sys.stderr)
        return 2
    model_dir, script_path, out_path = (Path(a) for a in sys.argv[1:])
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    script = json.loads(script_path.read_text())
    if not isinstance(script, dict):
        print("the script must be a JSON object {key: reply}", file=sys.stderr)
        return 2
    records = replay_records(tokenizer, script)
    with out_path.open("w") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    print(f"{len(records)} scripted replies written to {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
