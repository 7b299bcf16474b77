#!/usr/bin/env bash
# Start vLLM's OpenAI-compatible server on 127.0.0.1 and print its URL (see server.py).
#   tools/vllm/start.sh --port N [--model tiny|small|DIR] [--fcfs] [--plain] [--dev]
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/server.py" start "$@"
