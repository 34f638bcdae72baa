#!/usr/bin/env bash
# A real Kafka-protocol broker for development, tests and benchmarks: tansu 0.6 with
# sqlite storage (its memory storage loses messages on mid-batch resume; see FACTS.md).
#
#   tools/broker.sh install                      # build tansu once (~10 min), cached
#   tools/broker.sh start [PORT] [DIR]           # start in the background (default 9092, ./data/broker)
#   tools/broker.sh topic NAME PARTITIONS [PORT] # create a topic (topics are not auto-created)
#   tools/broker.sh stop [DIR]
#   tools/broker.sh path                         # print the tansu binary's path
#
# The binary lives under $RANKSTREAM_TOOLS (default ~/.cache/rankstream/tools) so that
# every clone and CI run on this machine shares one build.
set -euo pipefail

TOOLS="${RANKSTREAM_TOOLS:-$HOME/.cache/rankstream/tools}"
TANSU="$TOOLS/bin/tansu"
TANSU_VERSION="~0.6"

log() { echo "broker: $*" >&2; }

install() {
    if [ -x "$TANSU" ]; then
        return 0
    fi
    log "building tansu $TANSU_VERSION with sqlite storage into $TOOLS (about 10 minutes)"
    cargo install tansu --version "$TANSU_VERSION" --locked --features dynostore,libsql --root "$TOOLS"
}

wait_for_port() {
    local port=$1 tries=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -gt 200 ]; then
            log "broker did not open port $port within 20 s"
            return 1
        fi
        sleep 0.1
    done
}

start() {
    local port=${1:-9092} dir=${2:-./data/broker}
    install
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/tansu.pid" ] && kill -0 "$(cat "$dir/tansu.pid")" 2>/dev/null; then
        log "already running (pid $(cat "$dir/tansu.pid"))"
        return 0
    fi
    (
        cd "$dir"
        # Its own log level, not the caller's: a test run with RUST_LOG=info would
        # make tansu trace every span (gigabytes a minute, a core of its time).
        export RUST_LOG="${TANSU_LOG:-warn}"
        exec "$TANSU" broker \
            --listener-url "tcp://127.0.0.1:$port" \
            --advertised-listener-url "tcp://127.0.0.1:$port" \
            --storage-engine "sqlite://tansu.db" \
            >"$dir/tansu.log" 2>&1 </dev/null
    ) &
    echo $! >"$dir/tansu.pid"
    wait_for_port "$port"
    log "tansu listening on 127.0.0.1:$port (pid $(cat "$dir/tansu.pid"), data in $dir)"
}

topic() {
    local name=$1 partitions=$2 port=${3:-9092}
    "$TANSU" topic create --broker "tcp://127.0.0.1:$port" --partitions "$partitions" "$name" >/dev/null
}

stop() {
    local dir=${1:-./data/broker} pid tries=0
    if [ -f "$dir/tansu.pid" ]; then
        pid=$(cat "$dir/tansu.pid")
        kill "$pid" 2>/dev/null || true
        # Wait until it is gone (and its port free), so a start right after binds it.
        while kill -0 "$pid" 2>/dev/null && [ "$tries" -lt 100 ]; do
            sleep 0.1
            tries=$((tries + 1))
        done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$dir/tansu.pid"
    fi
}

command=${1:-}
shift || true
case "$command" in
    install) install ;;
    start) start "$@" ;;
    topic) topic "$@" ;;
    stop) stop "$@" ;;
    path) echo "$TANSU" ;;
    *)
        sed -n '2,13p' "$0"
        exit 2
        ;;
esac
