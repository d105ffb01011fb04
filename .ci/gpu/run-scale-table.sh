#!/bin/bash
# Third H200 check of 2026-11-28: issue 32's routes at 25/50/299 cameras on CUDA (lsq,
# steady-state V1 step with every operator cached), issue 33's V1 autoencoder case.
cd "$(dirname "$0")"
ROOT=$(cd .. && pwd)
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT" /tmp/logs
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$(date +%s); LIMIT=${LIMIT:-520}; RESERVE=0
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( LIMIT - RESERVE - $(el) )); }
hdr() { echo; echo "=== [$(el) s] $*"; }
tm() { local to=$1; shift; if [ "$(left)" -lt "$to" ]; then to=$(left); fi; if [ "$to" -lt 5 ]; then echo "$1 SKIPPED (no time)"; return; fi
       TM_TIMEOUT=$to python3 "$PWD/tm.py" "$@"; tail -n 3 "/tmp/logs/$1.out" | cut -c1-600; }
source ./common.sh
C="--set device.backend=cuda"
nvidia-smi -L
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 > "$OUT/smi.csv" 2>/dev/null &
SMI=$!
hdr "viewer, V1 autoencoder case (issue 33) on CUDA"
( cd "$ROOT" && BIN=$B PYTHON=python3 LSPLAT_TEST_DATA=$ROOT/.dev/data REPEATS=5 timeout 120 bash benches/view_biker_v1.sh 1280x720 /tmp/v1 -- --backend cuda ) 2>&1 | tail -n 22
hdr "scale scene (issue 32) on CUDA"
tm 60 tile $B synth --splats data/biker.ply --tile 3x3 --orbit 1 --width 16 --height 16 --out /tmp/tile
cp /tmp/tile/splats.ply scale/splats.ply
S=scale; BIG="--set render.cache_budget=110000000000"
for k in 25 50; do tm 40 average_$k $B solve --scene $S/scene_$k.toml --method average --out /tmp/runs/average_$k --force $C; done
tm 60 average3_50 $B solve --scene $S/scene_50.toml --method average --levels 1,2,3 --out /tmp/runs/average3_50 --force $C
tm 90 lsq_25 $B solve --scene $S/scene_25.toml --method lsq --out /tmp/runs/lsq_25 --force $C $BIG
tm 120 lsq_50 $B solve --scene $S/scene_50.toml --method lsq --out /tmp/runs/lsq_50 --force $C $BIG
for k in 25 50; do for p in f32 compact; do
  tm 40 bench_${p}_$k $B bench --scene $S/scene_$k.toml --iters 200 --warmup 20 --json $C $BIG --set render.cache=operator --set render.operator_precision=$p
done; done
tm 150 bench_compact_299 $B bench --scene $S/scene.toml --iters 600 --warmup 300 --json $C $BIG --set render.cache=operator --set render.operator_precision=compact
tm 200 lsq_299 $B solve --scene $S/scene.toml --method lsq --out /tmp/runs/lsq_299 --force $C $BIG --set render.operator_precision=compact
grep -h "lsq\|iteration\|solved\|level 1:" /tmp/logs/lsq_*.out | head -20
kill $SMI 2>/dev/null
cd /tmp/logs && tar czf "$OUT/logs.tgz" . 2>/dev/null
hdr "end"
