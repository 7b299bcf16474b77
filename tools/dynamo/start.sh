#!/usr/bin/env bash
# Start a Dynamo frontend + mocker on 127.0.0.1 and print its URL (installs Dynamo first if needed).
#   tools/dynamo/start.sh [--port N] [--replay FILE.jsonl] [--speedup X] [--workers N] [--no-trace]
# Stop it with tools/dynamo/stop.sh --port N. Logs, pids and traces: $AGENTCORE_DYNAMO_HOME/run-PORT.
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/stack.py" start "$@"
