#!/usr/bin/env bash
# Stop the router that start.sh started on a port, by the pid it recorded.
#   tools/router/stop.sh --port N
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/server.py" stop "$@"
