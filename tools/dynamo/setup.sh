#!/usr/bin/env bash
# Install NVIDIA Dynamo (frontend + mocker engine, CPU only: no GPU, weights, etcd or NATS) into
# its own virtual environment, and build the tiny weightless model it serves.
#
#   tools/dynamo/setup.sh            # idempotent; a second run only checks
#
# Environment:
#   AGENTCORE_DYNAMO_HOME   where everything goes (default: ~/.cache/agentcore-dynamo)
#   AGENTCORE_DYNAMO_PYTHON the interpreter the venv is made from (default: python3, >= 3.10)
#
# Layout: $HOME_DIR/venv (about 700 MB), $HOME_DIR/tinymodel, $HOME_DIR/installed-version.
#
# Why not `pip install ai-dynamo`: its dependency list does not resolve from PyPI alone (the
# `aisimulate` dependency is fetched from a private index, and one release pins a `certifi`
# version that was never published). The runtime wheel carries the compiled frontend, router
# and engine simulator; the `ai-dynamo` wheel carries the Python entry points. So: the
# runtime, then `ai-dynamo` without dependencies, then the dependencies the frontend and the
# mocker import.
set -euo pipefail

VERSION=1.6.1
HOME_DIR=${AGENTCORE_DYNAMO_HOME:-$HOME/.cache/agentcore-dynamo}
BASE_PYTHON=${AGENTCORE_DYNAMO_PYTHON:-python3}
TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=$HOME_DIR/venv
PY=$VENV/bin/python
MARKER=$HOME_DIR/installed-version

installed() {
    [[ -x $PY ]] && "$PY" - "$VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
import dynamo.frontend, dynamo.mocker, tokenizers  # noqa: F401  (importable)
sys.exit(0 if version("ai-dynamo") == sys.argv[1] == version("ai-dynamo-runtime") else 1)
EOF
}

mkdir -p "$HOME_DIR"
if installed; then
    echo "dynamo $VERSION: already installed in $VENV"
else
    echo "dynamo $VERSION: installing into $VENV (a few minutes on a fresh machine)"
    rm -f "$MARKER"
    "$BASE_PYTHON" -m venv --clear "$VENV"
    pip_install() { "$PY" -m pip install --quiet --disable-pip-version-check "$@"; }
    pip_install --upgrade pip
    pip_install "ai-dynamo-runtime==$VERSION"
    pip_install --no-deps "ai-dynamo==$VERSION"
    pip_install \
        'aiohttp>=3.14.3,<4' certifi 'kubernetes>=32.0.1,<33' 'msgspec>=0.19' \
        'prometheus-client>=0.23.1,<1' 'pyzmq>=26' 'redis>=6.2,<9' tqdm 'transformers>=4.56' \
        'typing-extensions>=4.10' 'zstandard>=0.23,<1' jinja2 tokenizers
    installed || { echo "dynamo $VERSION: the installed packages do not import" >&2; exit 1; }
fi

MODEL=$HOME_DIR/tinymodel
# build_tiny_model.py writes the marker last, so a half-written directory is rebuilt.
if [[ ! -f $MODEL/agentcore-tiny-model ]]; then
    rm -rf "$MODEL"
    "$PY" "$TOOLS/build_tiny_model.py" "$MODEL"
fi
echo "$VERSION" >"$MARKER"
echo "dynamo $VERSION ready: venv $VENV, model $MODEL"
