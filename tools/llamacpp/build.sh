#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU only) from the llama.cpp tree that the llama-cpp-python
# sdist on PyPI vendors, and keep the binary under a cache directory keyed by that version, so
# only the first run on a machine pays for the compile (3-6 minutes on 2 cores).
#
#   tools/llamacpp/build.sh          # idempotent: prints the binary's path when it exists
#
# Environment:
#   AGENTCORE_LLAMACPP_HOME   cache directory (default: ~/.cache/agentcore-llamacpp)
#   AGENTCORE_LLAMACPP_JOBS   parallel compile jobs (default: nproc)
#   AGENTCORE_LLAMACPP_PYTHON interpreter for the tools venv (default: python3)
#
# Layout: $HOME_DIR/venv (pip for the download; gguf + numpy for the model writer),
#         $HOME_DIR/sdist, $HOME_DIR/src-$VERSION, $HOME_DIR/$VERSION/bin/llama-server.
# The build directory is thrown away once the binary is copied out; the copy is done last, so a
# half-finished build is never mistaken for a finished one.
#
# Build flags: the two UI flags stop the configure step from downloading a web UI (it fails with
# no network); CURL/OPENSSL off drop two libraries the server does not need on 127.0.0.1;
# GGML_NATIVE off gives a binary that runs on any x86-64 CPU the cache may be copied to.
set -euo pipefail

VERSION=0.3.36
HOME_DIR=${AGENTCORE_LLAMACPP_HOME:-$HOME/.cache/agentcore-llamacpp}
JOBS=${AGENTCORE_LLAMACPP_JOBS:-$(nproc)}
BASE_PYTHON=${AGENTCORE_LLAMACPP_PYTHON:-python3}
BIN=$HOME_DIR/$VERSION/bin/llama-server
VENV=$HOME_DIR/venv

mkdir -p "$HOME_DIR"

# The tools venv: pip for the sdist download, gguf + numpy for tools/llamacpp/make_model.py.
if ! "$VENV/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
    "$BASE_PYTHON" -m venv --clear "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'gguf>=0.17' 'numpy>=1.26'
fi

if [[ -x $BIN ]] && "$BIN" --version >/dev/null 2>&1; then
    echo "llama-server (llama-cpp-python $VERSION): already built: $BIN"
    exit 0
fi

# A C++ compiler from the system (Debian's g++ when we may install it); cmake and ninja from
# the system, or else from PyPI into the tools venv.
if ! command -v g++ >/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq g++ >/dev/null
    else
        echo "missing g++ (Debian: apt-get install -y g++)" >&2
        exit 1
    fi
fi
for tool in cmake ninja; do
    if ! command -v "$tool" >/dev/null && [[ ! -x $VENV/bin/$tool ]]; then
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$tool"
    fi
done
export PATH=$PATH:$VENV/bin

SDIST=$HOME_DIR/sdist/llama_cpp_python-$VERSION.tar.gz
if [[ ! -f $SDIST ]]; then
    "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary :all: "llama-cpp-python==$VERSION" -d "$HOME_DIR/sdist"
fi
SRC=$HOME_DIR/src-$VERSION
if [[ ! -f $SRC/vendor/llama.cpp/CMakeLists.txt ]]; then
    rm -rf "$SRC" "$SRC.tmp"
    mkdir -p "$SRC.tmp"
    tar -xzf "$SDIST" -C "$SRC.tmp" --strip-components=1
    mv "$SRC.tmp" "$SRC"
fi

BUILD=$HOME_DIR/build-$VERSION
LOG=$HOME_DIR/build-$VERSION.log
echo "llama-server: building from llama-cpp-python $VERSION ($JOBS jobs; log $LOG)"
start=$(date +%s)
{
    cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
    cmake --build "$BUILD" --target llama-server -j "$JOBS"
} >"$LOG" 2>&1 || { tail -n 40 "$LOG" >&2; echo "llama-server: build failed (log $LOG)" >&2; exit 1; }
mkdir -p "$(dirname "$BIN")"
cp "$BUILD/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
rm -rf "$BUILD"
echo "llama-server built in $(($(date +%s) - start)) s: $BIN"
