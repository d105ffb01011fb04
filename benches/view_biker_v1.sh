#!/usr/bin/env bash
# The viewer's budget case as LangSplat V1 runs it (issue 33): the biker splat (152 746
# Gaussians), synth's 512-D features on its 50-camera orbit, LangSplat's 512 → 3
# autoencoder trained on them (`autoencoder train`), the dataset encoded to 3-D codes
# (`autoencoder encode`), codes fitted by `solve --method average` on three levels, then
# `view --bench` at SIZE (default 1280x720) with the autoencoder: every mode's stages,
# relevancy through the code table (relevancy itself tabulated per query). With EXACT=1
# it also renders each level's relevancy frame with the exact per-pixel decode and
# prints the table's relevancy error and segmentation agreement (slow).
# Usage: benches/view_biker_v1.sh [SIZE] [OUT] [-- view args, e.g. --backend cuda],
# from the repository root; BIN (default target/release/lsplat-engine), PYTHON (default
# .venv/bin/python), LSPLAT_TEST_DATA.
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
q=(--set log.progress=false)
if [ ! -f "$OUT/run/summary.json" ]; then
  "$BIN" synth --splats "$DATA/splats/playcanvas_biker.inria_sh0.ply" --dim 512 --out "$OUT/biker" --force >/dev/null
  "$BIN" import langsplat --source "$OUT/biker/language_features" --out "$OUT/biker/dataset" >/dev/null
  "$BIN" autoencoder train --dataset "$OUT/biker/dataset" --out "$OUT/ae.safetensors" --quiet
  "$BIN" autoencoder encode --model "$OUT/ae.safetensors" --dataset "$OUT/biker/dataset" --out "$OUT/biker/codes"
  sed -e 's/^dataset = .*/dataset = "codes"/' "$OUT/biker/scene.toml" > "$OUT/biker/scene_codes.toml"
  "$BIN" solve --scene "$OUT/biker/scene_codes.toml" --method average --levels 1,2,3 "${q[@]}" --out "$OUT/run" --force >/dev/null
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
"$BIN" view --run "$OUT/run" --model "$OUT/ae.safetensors" --text "$OUT/text.npy" --bench "$SIZE" --repeats "${REPEATS:-3}" \
  ${EXACT:+--bench-exact} "$@"
