#!/usr/bin/env bash
# Start or stop a throw-away Redis-compatible server on 127.0.0.1 with AOF on.
#   tools/redis/server.sh start DIR [PORT] [always|everysec]  -> prints "PORT PID", data in DIR
#   tools/redis/server.sh stop DIR                            -> stops the server by its pid
# PORT 0 (the default) picks a free port. The pid is kept in DIR/server.pid.
set -euo pipefail

cmd=${1:?usage: server.sh start|stop DIR [PORT] [FSYNC]}
dir=${2:?usage: server.sh start|stop DIR [PORT] [FSYNC]}

binary() {
    command -v redis-server || command -v valkey-server || {
        echo "server.sh: no redis-server; run tools/redis/install.sh" >&2
        exit 1
    }
}

case "$cmd" in
start)
    port=${3:-0}
    fsync=${4:-always}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$port" = 0 ]; then
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    fi
    "$(binary)" --bind 127.0.0.1 --port "$port" --appendonly yes --appendfsync "$fsync" \
        --save '' --dir "$dir" --daemonize no --logfile "$dir/server.log" \
        </dev/null >>"$dir/server.out" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/server.pid"
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port $pid"
            exit 0
        fi
        sleep 0.05
    done
    echo "server.sh: the server did not start; see $dir/server.log" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
    ;;
stop)
    if [ -f "$dir/server.pid" ]; then
        pid=$(cat "$dir/server.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        rm -f "$dir/server.pid"
    fi
    ;;
*)
    echo "usage: server.sh start|stop DIR [PORT] [FSYNC]" >&2
    exit 2
    ;;
esac
