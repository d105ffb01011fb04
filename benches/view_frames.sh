#!/usr/bin/env bash
# Viewer frame timings without a browser: `view --bench` renders every mode (RGB,
# features, relevancy, segmentation; V1 exact decode and code table) at the run's first
# camera resized to SIZE and prints each stage's minimum over the repeats.
# Usage: benches/view_frames.sh [SIZE] (default 1280x720), from the repository root.
# It trains the demo scene (a V1 run of 3-D features) into a temporary folder.
set -euo pipefail
SIZE=${1:-1280x720}
BIN=${BIN:-target/debug/lsplat-engine}
[ -x "$BIN" ] || cargo build -p lsplat-cli
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
"$BIN" train --set train.iterations=200 --set log.progress=false --out "$DIR/run" >/dev/null
"$BIN" view --run "$DIR/run" --bench "$SIZE" --repeats 5
