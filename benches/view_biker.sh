#!/usr/bin/env bash
# The viewer's frame budget case (issue 33): the biker splat (152 746 Gaussians) with
# 512-D CLIP-like features fitted by `solve --method average` on synth's orbit, a text
# file of random unit phrases of the same width, and `view --bench` at SIZE (default
# 1280x720): every mode's stages (project, raster, relevancy, shade, JPEG), minimum
# over the repeats, on the CPU backend.
# Usage: benches/view_biker.sh [SIZE] [OUT] [-- view args, e.g. --backend cuda], from the repository root; BIN (default
# target/release/lsplat-engine), PYTHON (default .venv/bin/python), LSPLAT_TEST_DATA.
set -euo pipefail
SIZE=${1:-1280x720}
OUT=${2:-$(mktemp -d)}
shift $(( $# < 2 ? $# : 2 ))
[ "${1:-}" = "--" ] && shift
BIN=${BIN:-target/release/lsplat-engine}
PYTHON=${PYTHON:-.venv/bin/python}
DATA=${LSPLAT_TEST_DATA:-../shared/data}
[ -x "$BIN" ] || cargo build --release -p lsplat-cli
mkdir -p "$OUT"
if [ ! -f "$OUT/run/summary.json" ]; then
  "$BIN" synth --splats "$DATA/splats/playcanvas_biker.inria_sh0.ply" --dim 512 --out "$OUT/biker" --force >/dev/null
  "$BIN" import langsplat --source "$OUT/biker/language_features" --out "$OUT/biker/dataset" >/dev/null
  "$BIN" solve --scene "$OUT/biker/scene.toml" --method average --set log.progress=false --out "$OUT/run" --force >/dev/null
fi
"$PYTHON" - "$OUT/text" <<'PY'
import sys
import numpy as np
names = ["object", "things", "stuff", "texture", "a bicycle wheel"]
e = np.random.default_rng(0).standard_normal((len(names), 512)).astype(np.float32)
e /= np.linalg.norm(e, axis=1, keepdims=True)
np.save(sys.argv[1] + ".npy", e)
open(sys.argv[1] + ".txt", "w").write("\n".join(names) + "\n")
PY
"$BIN" view --run "$OUT/run" --text "$OUT/text.npy" --bench "$SIZE" --repeats 3 "$@"
