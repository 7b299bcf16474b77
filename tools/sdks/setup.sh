#!/usr/bin/env bash
# Installs the official OpenAI and Anthropic Python SDKs into their own virtual environment,
# ~/.cache/agentcore-sdks (override with AGENTCORE_SDKS), apart from the project's: the test
# tests/sim/test_batch_sdks.py drives their Batch API calls against the simulator, and is
# skipped when this environment is absent.
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${AGENTCORE_SDKS:-$HOME/.cache/agentcore-sdks}"
if [ -x "$target/bin/python" ] && "$target/bin/python" -c "import openai, anthropic" 2>/dev/null; then
    echo "SDKs ready in $target"
    exit 0
fi
python3 -m venv "$target"
"$target/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.40" "anthropic>=0.40"
"$target/bin/python" -c "import openai, anthropic; print('openai', openai.__version__, 'anthropic', anthropic.__version__)"
echo "SDKs ready in $target"
