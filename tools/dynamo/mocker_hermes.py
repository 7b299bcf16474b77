"""Run Dynamo's mocker engine with a tool-call parser declared in its model card.

Run with the Python of the Dynamo virtual environment; every argument is the mocker's own::

    python tools/dynamo/mocker_hermes.py --model-path DIR --model-name tiny-mock ...

The frontend picks the tool-call parser from the model card a worker publishes, and the
1.6.1 mocker has no command-line flag for it. This launcher wraps the mocker's
``build_runtime_config`` (looked up in ``dynamo.mocker.main``'s namespace at launch) so that
each worker's runtime config names the parser before the card is published. The parser
defaults to ``hermes``; ``AGENTCORE_TOOL_CALL_PARSER`` overrides it.
"""

from __future__ import annotations

import os
from typing import Any

import dynamo.mocker.main as mocker_main

PARSER = os.environ.get("AGENTCORE_TOOL_CALL_PARSER", "hermes")

_original = mocker_main.build_runtime_config


def _with_tool_call_parser(engine_args: Any) -> Any:
    block_size, runtime_config = _original(engine_args)
    runtime_config.tool_call_parser = PARSER
    return block_size, runtime_config


mocker_main.build_runtime_config = _with_tool_call_parser

if __name__ == "__main__":
    mocker_main.main()
