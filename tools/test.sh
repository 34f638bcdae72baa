#!/usr/bin/env bash
# Set up the machine, then build and run the whole test suite (unit and integration
# tests, release profile). Extra arguments go to `cargo test`, e.g.
#   tools/test.sh --test catalog          # one integration test file
#   tools/test.sh -- --nocapture          # options for the test binaries
# Every test binary runs even after a failure, so one run reports all failures;
# exits non-zero when the build or any test fails.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    . "$HOME/.cargo/env"
fi

bash tools/setup.sh
exec cargo test --release --no-fail-fast "$@"
