#!/usr/bin/env bash
# Install vLLM for CPUs (cached) and write the test models; idempotent.
#
#   tools/vllm/setup.sh
#
# Models (in $AGENTCORE_VLLM_HOME/models, rewritten when make_model.py changes):
#   tiny   0.7 M parameters (hidden 128, 2 layers, 4 heads of 32): the tests and the benchmark
#   small  13 M parameters (hidden 512, 4 layers, 8 heads of 64): prefill costs real time on a
#          CPU (bench_vllm.py --model small)
set -euo pipefail
TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HOME_DIR=${AGENTCORE_VLLM_HOME:-$HOME/.cache/agentcore-vllm}
bash "$TOOLS/install.sh"
PY=$HOME_DIR/venv-0.32.0/bin/python
MODELS=$HOME_DIR/models
STAMP=$MODELS/writer.sha256
want=$(sha256sum "$TOOLS/make_model.py" | cut -d' ' -f1)
if [[ ! -f $STAMP || $(cat "$STAMP") != "$want" ]]; then
    rm -rf "$MODELS"
    mkdir -p "$MODELS"
    "$PY" "$TOOLS/make_model.py" "$MODELS/tiny" 2>/dev/null
    "$PY" "$TOOLS/make_model.py" "$MODELS/small" --hidden 512 --layers 4 --heads 8 2>/dev/null
    echo "$want" >"$STAMP"  # written last: a half-written set is rewritten next time
fi
echo "vLLM ready: $PY, models in $MODELS"
