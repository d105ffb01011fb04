#!/usr/bin/env bash
# CLIP encoder throughput at ViT-B/16's real size (random weights run as fast as real
# ones): text phrases/s and image crops/s through ONNX Runtime.
#   PYTHON=.venv/bin/python benches/clip_onnx.sh [--threads N] [--batch B] [--backend cuda] ...
# Needs numpy and onnx in $PYTHON, and an ONNX Runtime library (ORT_DYLIB_PATH or the
# search of docs/formats.md). The models (~600 MB) go to ${CLIP_BENCH_DIR:-/tmp/clip-vit-b-16}.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
DIR=${CLIP_BENCH_DIR:-/tmp/clip-vit-b-16}
if [ ! -f "$DIR/image.onnx" ]; then
  "$PYTHON" scripts/clip_onnx.py make "$DIR" --size vit-b-16 --seed 0
fi
cargo run --release -q -p lsplat-models --example clip_throughput -- "$DIR" "$@"
