#!/usr/bin/env bash
# Install vllm-router (a Rust binary shipped in an abi3 wheel on PyPI) into a venv of its own,
# keyed by its version, so only the first run on a machine pays for it (seconds: one 24 MB wheel).
#
#   tools/router/install.sh          # idempotent: a moment when the venv is already complete
#
# Environment:
#   AGENTCORE_ROUTER_HOME    cache directory (default: ~/.cache/agentcore-router)
#
# Layout: $HOME_DIR/venv-$VERSION/bin/vllm-router; $HOME_DIR/venv-$VERSION/.complete is written
# last, so a half-finished install is started again from scratch.
set -euo pipefail

VERSION=0.1.17
HOME_DIR=${AGENTCORE_ROUTER_HOME:-$HOME/.cache/agentcore-router}
VENV=$HOME_DIR/venv-$VERSION
DONE=$VENV/.complete

if [[ -f $DONE ]] && "$VENV/bin/vllm-router" --help >/dev/null 2>&1; then
    echo "vllm-router $VERSION: already installed: $VENV"
    exit 0
fi

mkdir -p "$HOME_DIR"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "vllm-router==$VERSION"
"$VENV/bin/vllm-router" --help >/dev/null
touch "$DONE"
echo "vllm-router $VERSION: installed: $VENV"
