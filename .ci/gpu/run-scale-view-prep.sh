#!/bin/bash
# .ci/gpu/run-scale-view-prep.sh (copied to .dev/ by `EXTRAS=1 .ci/gpu-bundle.sh`): the GPU check of 2026-11-28: CUDA tests, issue 32's scale
# scene on CUDA, issue 33's viewer on CUDA, issue 31's preprocess with ONNX Runtime's
# CUDA provider (when /tmp/ort holds it), then the benches of run.sh. Logs to $OUT.
cd "$(dirname "$0")"
ROOT=$(cd .. && pwd)
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT" /tmp/logs
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$(date +%s); LIMIT=${LIMIT:-540}; RESERVE=0
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( LIMIT - RESERVE - $(el) )); }  # seconds this section may still use
hdr() { echo; echo "=== [$(el) s] $*"; }
tm() { local to=$1; shift; if [ "$(left)" -lt "$to" ]; then to=$(left); fi; if [ "$to" -lt 5 ]; then echo "$1 SKIPPED (no time)"; return; fi
       TM_TIMEOUT=$to python3 "$PWD/tm.py" "$@"; tail -n 4 "/tmp/logs/$1.out" | cut -c1-400; }
source ./common.sh
export LSPLAT_REQUIRE_CUDA=1
C="--set device.backend=cuda"
nvidia-smi -L; $B info 2>&1 | head -12
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 > "$OUT/smi.csv" 2>/dev/null &
SMI=$!
ORT=0
if [ -f /tmp/ort/libonnxruntime.so.1.31.1 ] && [ -f /tmp/ort/libonnxruntime_providers_cuda.so ]; then ORT=1; fi
echo "ORT CUDA provider present: $ORT"
if [ "$ORT" = 1 ]; then # models on the CPU while the GPU runs the rest
  ( cd "$ROOT" && mkdir -p /tmp/sam && python3 scripts/sam_full_onnx.py make /tmp/sam/sam-vit_h-blobs --encoder vit_h --blobs > /tmp/logs/make_sam.txt 2>&1
    python3 scripts/clip_onnx.py make /tmp/sam/clip-vit-b-16 --size vit-b-16 --seed 0 > /tmp/logs/make_clip.txt 2>&1; echo done >> /tmp/logs/make_clip.txt
    for m in sam-vit_h-blobs clip-vit-b-16; do python3 scripts/half_onnx.py /tmp/sam/$m /tmp/sam/$m-fp16; done > /tmp/logs/make_half.txt 2>&1; echo done >> /tmp/logs/make_half.txt ) &
fi

hdr "viewer (issue 33) on CUDA: biker, 512-D, 1280x720"
tm 60 b512_solve $B solve --scene b512/scene.toml --method average --out /tmp/runs/b512 --force $C
tm 60 view_cuda $B view --run /tmp/runs/b512 --text text.npy --bench 1280x720 --repeats 5 --backend cuda
cat /tmp/logs/view_cuda.out | head -40
hdr "viewer (issue 33) on CUDA: the V1 budget case (3-D codes, the autoencoder's table), 1280x720"
# The CPU's budget case (benches/view_biker_v1.sh: synth, autoencoder, encode, solve on
# this machine's CPU, then view --bench on CUDA); the frame goal is <= 10 ms.
( cd "$ROOT" && BIN=$B PYTHON=python3 LSPLAT_TEST_DATA="$PWD/.dev/data" REPEATS=5 \
    timeout "$(( $(left) < 150 ? $(left) : 150 ))" bash benches/view_biker_v1.sh 1280x720 /tmp/v1ae -- --backend cuda ) 2>&1 | tail -n 20

hdr "scale scene (issue 32) on CUDA"
tm 60 tile $B synth --splats data/biker.ply --tile 3x3 --orbit 1 --width 16 --height 16 --out /tmp/tile
cp /tmp/tile/splats.ply scale/splats.ply && md5sum scale/splats.ply
S=scale
RESERVE=$(( ORT ? 250 : 110 ))  # kept for what follows
tm 90 average_299 $B solve --scene $S/scene.toml --method average --out /tmp/runs/average_299 --force $C
tm 100 average3_299 $B solve --scene $S/scene.toml --method average --levels 1,2,3 --out /tmp/runs/average3_299 --force $C
tm 80 bench_compact_299 $B bench --scene $S/scene.toml --iters 20 --warmup 2 --json $C --set render.cache=operator --set render.operator_precision=compact
tm 45 bench_compact_50 $B bench --scene $S/scene_50.toml --iters 50 --warmup 5 --json $C --set render.cache=operator --set render.operator_precision=compact
tm 45 bench_f32_50 $B bench --scene $S/scene_50.toml --iters 50 --warmup 5 --json $C --set render.cache=operator --set render.operator_precision=f32
tm 90 lsq_50 $B solve --scene $S/scene_50.toml --method lsq --out /tmp/runs/lsq_50 --force $C
grep -h -o '"holdout[^}]*}' /tmp/runs/*/summary.json 2>/dev/null | head -5

RESERVE=110
if [ "$ORT" = 1 ]; then
  hdr "preprocess (issue 31) with ONNX Runtime's CUDA provider"
  cuda_libs=$(python3 -c "import glob,os,nvidia; r=[os.path.dirname(p) for p in glob.glob(os.path.join(list(nvidia.__path__)[0],'**','lib*.so*'),recursive=True)]; print(':'.join(sorted(set(r))))" 2>/dev/null)
  export LD_LIBRARY_PATH="/tmp/ort:$cuda_libs:$LD_LIBRARY_PATH"
  for i in $(seq 1 60); do grep -q done /tmp/logs/make_clip.txt 2>/dev/null && break; sleep 2; done
  tail -n 3 /tmp/logs/make_sam.txt /tmp/logs/make_clip.txt
  ORT_DYLIB_PATH=/tmp/ort/libonnxruntime.so.1.31.1 $B info 2>&1 | grep -i -A4 "onnx" | head -8
  mkdir -p /tmp/sam/images-4 && cp images/*.jpg /tmp/sam/images-4/
  ( cd "$ROOT" && ORT_LIB=/tmp/ort/libonnxruntime.so.1.31.1 LSPLAT_BIN=$B PYTHON=python3 THREADS=16 SAM_BENCH_DIR=/tmp/sam \
      timeout $(left) bash benches/preprocess_sam.sh vit_h 4 -- $C ) 2>&1 | tail -n 40
  # Not tried on 2026-11-28: larger decoder and CLIP batches on the GPU (the 4-image
  # run's folders are reused; one image).
  mkdir -p /tmp/sam/images-1 && cp "$(ls images/*.jpg | head -1)" /tmp/sam/images-1/
  ( cd "$ROOT" && ORT_LIB=/tmp/ort/libonnxruntime.so.1.31.1 LSPLAT_BIN=$B PYTHON=python3 THREADS=16 SAM_BENCH_DIR=/tmp/sam \
      timeout $(left) bash benches/preprocess_sam.sh vit_h 1 -- $C --set preprocess.points_per_batch=1024 --set preprocess.clip_batch=256 ) 2>&1 | tail -n 25
  # Not tried before 2026-11-29: float16 copies of both models (scripts/half_onnx.py,
  # converted above while the GPU ran the rest), the same batches.
  for i in $(seq 1 45); do grep -q done /tmp/logs/make_half.txt 2>/dev/null && break; sleep 2; done
  tail -n 3 /tmp/logs/make_half.txt
  ( cd "$ROOT" && ORT_LIB=/tmp/ort/libonnxruntime.so.1.31.1 LSPLAT_BIN=$B PYTHON=python3 THREADS=16 SAM_BENCH_DIR=/tmp/sam HALF=1 \
      timeout $(left) bash benches/preprocess_sam.sh vit_h 1 -- $C --set preprocess.points_per_batch=1024 --set preprocess.clip_batch=256 ) 2>&1 | tail -n 25
  # Not tried before 2026-11-30: the same without the CPU work overlapped with the
  # decoder's and CLIP's batches (what `preprocess.overlap`, on by default, gains).
  ( cd "$ROOT" && ORT_LIB=/tmp/ort/libonnxruntime.so.1.31.1 LSPLAT_BIN=$B PYTHON=python3 THREADS=16 SAM_BENCH_DIR=/tmp/sam HALF=1 \
      timeout $(left) bash benches/preprocess_sam.sh vit_h 1 -- $C --set preprocess.points_per_batch=1024 --set preprocess.clip_batch=256 --set preprocess.overlap=false ) 2>&1 | tail -n 6
fi

RESERVE=0
hdr "CUDA tests"
for t in parity training; do tm 70 "test_$t" bin/t_$t cuda:: --test-threads 8; grep -E "test result|FAILED|panicked" /tmp/logs/test_$t.out | head -8; done
tm 60 test_v2 bin/t_langsplat_v2 --test-threads 8; grep -E "test result|FAILED|panicked" /tmp/logs/test_v2.out | head -8

hdr "benches of run.sh (V1 biker / s3, V2 s512)"
P="--json $C"
for c in operator none; do tm 25 bench_biker_$c $B bench --scene biker/scene.toml --iters 300 --warmup 60 $P --set render.cache=$c; done
tm 20 bench_s3 $B bench --scene s3/scene.toml --iters 300 $P
tm 25 bench_s512_v2 $B bench --scene s512/scene.toml --set train.model=langsplat_v2 --iters 200 $P
LSPLAT_GPU_PROFILE=1 tm 25 profile_v2 $B bench --scene s512/scene.toml --set train.model=langsplat_v2 --iters 50 $P
head -20 /tmp/logs/profile_v2.out
kill $SMI 2>/dev/null
cd /tmp/logs && tar czf "$OUT/logs.tgz" . 2>/dev/null
hdr "end"
