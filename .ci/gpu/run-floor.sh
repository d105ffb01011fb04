#!/bin/bash
# Fourth H200 check: the bandwidth probe after its rewrite, and the floor ratios.
cd "$(dirname "$0")"
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
source ./common.sh
P="--json --set device.backend=cuda"
j() { python3 -c "import json,sys
for l in sys.stdin:
    if l.startswith('{'):
        d=json.loads(l); print(sys.argv[1], 'ms/step %.4f'%d['ms_per_step'], 'read_gb_per_s', d['read_gb_per_s'], 'floor_ms', d['floor_ms'], 'floor_ratio', d['floor_ratio'])" "$1"; }
for i in 1 2; do timeout 60 $B bench --scene biker/scene.toml --iters 300 --warmup 60 $P --set render.cache=operator 2>/dev/null | j biker_$i; done
timeout 60 $B bench --scene s3/scene.toml --iters 300 $P 2>/dev/null | j s3
timeout 60 $B synth --splats data/biker.ply --tile 3x3 --orbit 1 --width 16 --height 16 --out /tmp/tile >/dev/null 2>&1; cp /tmp/tile/splats.ply scale/
for p in f32 compact; do timeout 60 $B bench --scene scale/scene_50.toml --iters 200 --warmup 20 $P --set render.cache=operator --set render.operator_precision=$p 2>/dev/null | j scale50_$p; done
