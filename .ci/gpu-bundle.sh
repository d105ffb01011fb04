#!/usr/bin/env bash
# .ci/gpu-bundle.sh — packs what a GPU check needs into .dev/ (git-ignored through
# .git/info/exclude), for a machine that has a GPU and its driver but no Rust: the
# engine and the CUDA test binaries (built here, stripped, gzipped), the biker splat,
# and bench scenes made with `synth` (biker: 50 cameras at 640×480, 3-D features;
# s3 / s512: 20 cameras at 320×240, 3-D and 512-D). Then, on that machine, from the
# repository root:
#
#   bash .dev/run.sh        # tests, per-kernel profile, benches; logs to $OUT or .dev/out
#
# With EXTRAS=1 it also packs what .ci/gpu/run-scale-view-prep.sh needs (issue 32's
# 1.4 M-Gaussian scale scene at 299 cameras of 1264×832 (its dataset; the splat is
# re-made there by `synth --tile`), a 512-D biker run for the viewer, four 1264×832
# photos for `preprocess`): about 58 MB in all, and 5 minutes more here. Run there as
#
#   bash .dev/run-scale-view-prep.sh   # after .ci/ort-gpu-bundle.sh's .ort was unpacked into /tmp/ort
#
# Environment: LSPLAT_TEST_DATA (default ../shared/data). About 30 MB in all.
set -euo pipefail
cd "$(dirname "$0")/.."
data="${LSPLAT_TEST_DATA:-../shared/data}"
ply="$data/splats/playcanvas_biker.inria_sh0.ply"
[ -f "$ply" ] || { echo "gpu-bundle: $ply not found (set LSPLAT_TEST_DATA)" >&2; exit 1; }
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude

cargo build --release -p lsplat-cli --features cuda
bins=()
for pkg in lsplat-gpu langsplat-v2; do
  while IFS= read -r exe; do bins+=("$exe"); done < <(
    cargo test --release -p "$pkg" --features cuda --no-run --message-format=json 2>/dev/null |
      python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("parity", "training", "langsplat_v2"):
        print(m["executable"])')
done

rm -rf .dev && mkdir -p .dev/bin .dev/data
cp .ci/gpu/common.sh .dev/
cp target/release/lsplat-engine .dev/bin/
for b in "${bins[@]}"; do cp "$b" ".dev/bin/t_$(basename "$b" | sed 's/-[0-9a-f]*$//')"; done
strip .dev/bin/* && xz -T0 -9 .dev/bin/*
cp "$ply" .dev/data/biker.ply

B=target/release/lsplat-engine
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make_scene() { # name orbit width height dim
  "$B" synth --splats "$ply" --orbit "$2" --width "$3" --height "$4" --objects 12 --dim "$5" --out "$tmp/$1" >/dev/null
  "$B" import langsplat --source "$tmp/$1/language_features" --out "$tmp/$1/dataset" >/dev/null
  mkdir -p ".dev/$1"
  cp -r "$tmp/$1/cameras.json" "$tmp/$1/dataset" ".dev/$1/"
  printf '[scene]\nsplats = "../data/biker.ply"\ncameras = "cameras.json"\ndataset = "dataset"\nlevel = 1\n' > ".dev/$1/scene.toml"
}
make_scene biker 50 640 480 3
make_scene s3 20 320 240 3
make_scene s512 20 320 240 512

cat > .dev/run.sh <<'RUN'
#!/bin/bash
# Runs on the GPU machine: CUDA tests, per-kernel profile, benches.
cd "$(dirname "$0")"
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
source ./common.sh
export LSPLAT_REQUIRE_CUDA=1
nvidia-smi -L; $B info | head -6
for t in bin/t_*; do echo "-- $t"; timeout 200 $t cuda:: --test-threads 4 2>&1 | grep -E "test result|FAILED|panicked"; done
echo "-- langsplat-v2 ops on simt and cuda"
timeout 200 bin/t_langsplat_v2 --test-threads 4 > "$OUT/plugin_tests.txt" 2>&1; grep -E "test result|FAILED" "$OUT/plugin_tests.txt"
P="--json --set device.backend=cuda"
LSPLAT_GPU_PROFILE=1 timeout 90 $B bench --scene s512/scene.toml --set train.model=langsplat_v2 --iters 50 $P 2>&1 | head -16
for c in operator none; do timeout 90 $B bench --scene biker/scene.toml --iters 300 --warmup 60 $P --set render.cache=$c; done
timeout 60 $B bench --scene s3/scene.toml --iters 300 $P
timeout 90 $B bench --scene s512/scene.toml --set train.model=langsplat_v2 --iters 200 $P
RUN

if [ "${EXTRAS:-0}" = 1 ]; then
  make_scene b512 12 640 480 512
  "$B" synth --splats "$ply" --tile 3x3 --orbit 299 --subsets 25,50 --width 1264 --height 832 --out "$tmp/scale" >/dev/null
  "$B" import langsplat --source "$tmp/scale/language_features" --out "$tmp/scale/dataset" >/dev/null
  mkdir -p .dev/scale
  cp -r "$tmp/scale/dataset" "$tmp/scale"/cameras*.json .dev/scale/
  for f in "$tmp/scale"/scene*.toml; do sed -e '/^#/d' "$f" > ".dev/scale/$(basename "$f")"; done
  py=${PYTHON:-.venv/bin/python}
  "$py" - "$data" .dev <<'PY'
import glob, os, sys
import cv2
import numpy as np
data, out = sys.argv[1], sys.argv[2]
names = ["object", "things", "stuff", "texture", "a bicycle wheel"]
e = np.random.default_rng(0).standard_normal((len(names), 512)).astype(np.float32)
np.save(os.path.join(out, "text.npy"), e / np.linalg.norm(e, axis=1, keepdims=True))
open(os.path.join(out, "text.txt"), "w").write("\n".join(names) + "\n")
srcs = sorted(glob.glob(os.path.join(data, "snowmiku/input_samples/*.jpg")))
srcs += sorted(glob.glob(os.path.join(data, "snowmiku/images_8/*.png")))
os.makedirs(os.path.join(out, "images"), exist_ok=True)
for i, p in enumerate(srcs[:4]):
    im = cv2.resize(cv2.imread(p), (1264, 832), interpolation=cv2.INTER_AREA)
    cv2.imwrite(os.path.join(out, "images", f"img{i:03d}.jpg"), im, [cv2.IMWRITE_JPEG_QUALITY, 95])
PY
  mkdir -p .dev/data/splats && ln -sf ../biker.ply .dev/data/splats/playcanvas_biker.inria_sh0.ply
  cp .ci/gpu/run-*.sh .ci/gpu/tm.py .dev/
fi
du -sh .dev
