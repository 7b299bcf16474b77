#!/usr/bin/env bash
# Build llama-server (cached) and write the test models; idempotent.
#
#   tools/llamacpp/setup.sh
#
# Models (in $AGENTCORE_LLAMACPP_HOME/models, rewritten when make_model.py changes):
#   tiny.gguf   0.6 M parameters (n_embd 128, 2 layers): instant; the integration tests
#   small.gguf  13 M parameters (n_embd 512, 4 layers): a 2,000-token prompt costs real time
#               on a CPU; the benchmark
set -euo pipefail
TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HOME_DIR=${AGENTCORE_LLAMACPP_HOME:-$HOME/.cache/agentcore-llamacpp}
bash "$TOOLS/build.sh"
PY=$HOME_DIR/venv/bin/python
MODELS=$HOME_DIR/models
STAMP=$MODELS/writer.sha256
want=$(sha256sum "$TOOLS/make_model.py" | cut -d' ' -f1)
if [[ ! -f $STAMP || $(cat "$STAMP") != "$want" ]]; then
    rm -rf "$MODELS"
    mkdir -p "$MODELS"
    "$PY" "$TOOLS/make_model.py" "$MODELS/tiny.gguf"
    "$PY" "$TOOLS/make_model.py" "$MODELS/small.gguf" --n-embd 512 --n-layer 4 --n-ff 1408 \
        --n-head 8 --n-head-kv 4
    echo "$want" >"$STAMP"  # written last: a half-written set is rewritten next time
fi
echo "llama-server ready: $HOME_DIR/0.3.36/bin/llama-server, models in $MODELS"
