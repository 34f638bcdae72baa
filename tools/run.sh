#!/usr/bin/env bash
# Set up the machine, build the server and serve on the embedded default
# (config/default.toml: one node, 8 shards, RocksDB under ./data, http://127.0.0.1:8080).
#
#   tools/run.sh                          # serve with the defaults
#   tools/run.sh --bind 0.0.0.0:9000      # any `rankstream serve` option passes through
#
# The server prints `rankstream listening on http://IP:PORT` and, on the first start
# with a fresh data dir, `bootstrap admin key: <secret>` (unless RANKSTREAM_ADMIN_KEY
# is set, in which case that value is the admin key).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    . "$HOME/.cargo/env"
fi

# Only what serving needs: no Kafka broker (the embedded default does not use one).
bash tools/setup.sh serve
cargo build --release --bin rankstream
exec "${CARGO_TARGET_DIR:-target}/release/rankstream" serve "$@"
