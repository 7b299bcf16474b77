#!/usr/bin/env bash
# Start llama-server on 127.0.0.1 and print its URL (see server.py for the options).
#   tools/llamacpp/start.sh --port N [--model tiny|small|PATH.gguf] [--slots 8] [--slot-save]
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/server.py" start "$@"
