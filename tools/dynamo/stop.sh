#!/usr/bin/env bash
# Stop the Dynamo stack that start.sh started on a port, by the pids it recorded.
#   tools/dynamo/stop.sh --port N
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/stack.py" stop "$@"
