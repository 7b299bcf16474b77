#!/usr/bin/env bash
# Start vllm-router on 127.0.0.1 in front of replicas and print its URL (see server.py).
#   tools/router/start.sh --port N --worker URL --worker URL [--policy consistent_hash]
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/server.py" start "$@"
