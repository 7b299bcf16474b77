#!/usr/bin/env bash
# Install a Redis-compatible server (Debian's redis-server, or valkey-server) for the
# distributed tier. Idempotent: does nothing when one is already on PATH.
# Prints the path of the server binary on its last line.
set -euo pipefail

for name in redis-server valkey-server; do
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "tools/redis/install.sh: no redis-server on PATH and no apt-get to install it" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
# Debian starts no daemon inside a container; the tests start their own on a free port.
$SUDO apt-get install -y -q --no-install-recommends redis-server >/dev/null
command -v redis-server
