#!/usr/bin/env bash
# Loads the MovieLens sample (ml-latest-small: 9,742 movies, 100,836 ratings) into a
# running node with `rankstream import`: movies as items of the table "movies" (title
# -> name, genres -> groups), ratings as "rating" events of their users.
#
#   RANKSTREAM_ADMIN_KEY=<admin key> tools/load-movielens.sh [URL]   # default http://127.0.0.1:8080
#
# MOVIELENS names another copy of the data (default ../shared/data/movielens_latest_small).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
url="${1:-http://127.0.0.1:8080}"
data="${MOVIELENS:-../shared/data/movielens_latest_small}"
rankstream="${CARGO_TARGET_DIR:-target}/release/rankstream"
[ -x "$rankstream" ] || cargo build --release --bin rankstream

"$rankstream" import "$data/movies.csv" --url "$url" --kind items --table movies \
    --id-column movieId --map title=name --map genres=groups --split 'genres=|'
"$rankstream" import "$data/ratings.csv" --url "$url" --kind events --event-type rating \
    --map userId=uid --map movieId=item_id --map timestamp=original_timestamp
