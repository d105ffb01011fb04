#!/usr/bin/env bash
# `lsplat-engine preprocess` (release build) with SAM at its real architecture and size
# (seeded random weights, scripts/sam_full_onnx.py) and CLIP ViT-B/16's image tower
# (scripts/clip_onnx.py), on 1264x832 photos (snowmiku's full-size JPEGs, then its
# images_8, resized): seconds per image per step and the work behind them.
#
#   PYTHON=.venv/bin/python benches/preprocess_sam.sh [vit_t|vit_b|vit_l|vit_h] [N_IMAGES] [-- preprocess args]
#
# Environment: BLOBS=1 (default) builds the decoder with --blobs: SAM's decoder runs in
# full but its outputs are scripts/sam_onnx.py's blobs, so the generator, clean-up, NMS
# and CLIP see realistic numbers of masks (random weights alone give noise masks that
# SAM's filters drop: BLOBS=0 measures that). CLIP_INT8=1 uses the opt-in
# image.int8.onnx (scripts/quantize_clip.py) and, when the float32 run of the same model
# and images exists, prints the features' cosine to it (the masks are the same).
# HALF=1 runs float16 copies of both folders (scripts/half_onnx.py; for GPUs) and
# compares with the float32 run in the same way where the masks are the same (with
# BLOBS=1 they are not: the synthetic blobs hash the prompt point, which float16 moves).
# LSPLAT_BIN: an already built lsplat-engine (default: cargo build --release here).
# ORT_LIB: the ONNX Runtime library to use (default: the onnxruntime wheel of $PYTHON).
# THREADS (default 2) sets device.threads (ONNX Runtime) and preprocess.threads.
# Files go to ${SAM_BENCH_DIR:-/tmp/lsplat-sam-bench} (ViT-H: 2.5 GB of weights).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
MODEL=${1:-vit_t}
N=${2:-1}
shift $(( $# < 2 ? $# : 2 ))
[ "${1:-}" = "--" ] && shift
DIR=${SAM_BENCH_DIR:-/tmp/lsplat-sam-bench}
BLOBS=${BLOBS:-1}
CLIP_INT8=${CLIP_INT8:-0}
HALF=${HALF:-0}
THREADS=${THREADS:-2}
DATA=${LSPLAT_TEST_DATA:-../shared/data}
mkdir -p "$DIR"

sam="$DIR/sam-$MODEL"
blob_arg=()
if [ "$BLOBS" = 1 ]; then sam="$sam-blobs"; blob_arg=(--blobs); fi
if [ ! -f "$sam/decoder.onnx" ]; then
  "$PYTHON" scripts/sam_full_onnx.py make "$sam" --encoder "$MODEL" "${blob_arg[@]}"
fi
clip="$DIR/clip-vit-b-16"
if [ ! -f "$clip/image.onnx" ]; then
  "$PYTHON" scripts/clip_onnx.py make "$clip" --size vit-b-16 --seed 0
fi
clip_file=image.onnx
if [ "$CLIP_INT8" = 1 ]; then
  clip_file=image.int8.onnx
  [ -f "$clip/$clip_file" ] || "$PYTHON" scripts/quantize_clip.py "$clip"
fi
half=""
if [ "$HALF" = 1 ]; then
  half="-fp16"
  for m in "$sam" "$clip"; do
    [ -d "$m-fp16" ] || "$PYTHON" scripts/half_onnx.py "$m" "$m-fp16"
  done
  sam="$sam-fp16" clip="$clip-fp16"
fi
images="$DIR/images-$N"
if [ ! -d "$images" ]; then
  mkdir -p "$images.tmp"
  "$PYTHON" - "$DATA" "$images.tmp" "$N" <<'EOF'
import glob, os, sys
import cv2
data, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
srcs = sorted(glob.glob(os.path.join(data, "snowmiku/input_samples/*.jpg")))
srcs += sorted(glob.glob(os.path.join(data, "snowmiku/images_8/*.png")))
for i, p in enumerate(srcs[:n]):
    im = cv2.imread(p)
    cv2.imwrite(os.path.join(out, f"img{i:03d}.png"), cv2.resize(im, (1264, 832), interpolation=cv2.INTER_AREA))
EOF
  mv "$images.tmp" "$images"
fi
BIN=${LSPLAT_BIN:-}
if [ -z "$BIN" ]; then cargo build --release -q -p lsplat-cli; BIN=target/release/lsplat-engine; fi
# Extra preprocess arguments get their own output folder (a short hash of them), so
# the int8 comparison below only meets a float32 run of the same settings.
extra=""
[ $# -gt 0 ] && extra="-$(printf '%s ' "$@" | cksum | cut -c1-8 | tr -d ' ')"
tag="$MODEL-b$BLOBS-${clip_file%.onnx}$half-t$THREADS-n$N$extra"
out="$DIR/out-$tag"
rm -rf "$out"
lib=${ORT_LIB:-$("$PYTHON" -c "import glob, os, onnxruntime; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so.*')))[-1])")}
timer() { # GNU time where installed, else wall seconds only
  if [ -x /usr/bin/time ]; then /usr/bin/time -f "wall %e s, user %U s, sys %S s, max RSS %M KB" "$@"; return; fi
  local t0; t0=$(date +%s.%N); "$@"; awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "wall %.2f s\n", b - a }' >&2
}
echo "== $tag: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
timer "$BIN" preprocess --images "$images" --sam "$sam" --clip "$clip" --out "$out" \
  --set "onnx.runtime=$lib" --set "device.threads=$THREADS" --set "preprocess.threads=$THREADS" \
  --set "preprocess.clip_image_file=$clip_file" "$@"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
ref="$DIR/out-$MODEL-b$BLOBS-image-t$THREADS-n$N$extra"
if [ "$CLIP_INT8$HALF" != 00 ] && [ -d "$ref" ]; then
  "$PYTHON" - "$ref/language_features" "$out/language_features" "${clip_file%.onnx}$half" <<'EOF'
import glob, os, sys
import numpy as np
a_dir, b_dir, what = sys.argv[1:4]
cos = []
for fa in sorted(glob.glob(os.path.join(a_dir, "*_f.npy"))):
    fb = os.path.join(b_dir, os.path.basename(fa))
    sa, sb = (np.load(f.replace("_f.npy", "_s.npy")) for f in (fa, fb))
    if sa.shape != sb.shape or (sa != sb).any():
        agree = ((sa >= 0) == (sb >= 0)).mean() if sa.shape == sb.shape else 0.0
        print(f"{what} vs float32: the masks differ ({os.path.basename(fa)}: {agree:.1%} of pixels agree on mask or none)")
        sys.exit(0)
    a, b = np.load(fa).astype(np.float64), np.load(fb).astype(np.float64)
    cos.append((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))
c = np.concatenate(cos)
print(f"{what} vs float32 CLIP features: {len(c)} crops, cosine min {c.min():.5f}, mean {c.mean():.5f}, "
      f"1st percentile {np.percentile(c, 1):.5f}")
EOF
fi
