#!/usr/bin/env bash
# Issue 32's scale scene and its routes, one table: the 3×3 tiled biker (1 374 714
# Gaussians), orbit cameras at 1264×832, with 25 and 50 camera subsets of a 299-camera
# orbit sharing one dataset. A benchmark, not a test (minutes to hours on 2 cores).
#
#   bash benches/scale.sh [OUT] [CAMERAS...]     # default OUT=/tmp/lsplat-scale, CAMERAS=25 50
#
# Env: LSPLAT_SCALE_ORBIT (299), LSPLAT_SCALE_KEEP (1; 16 with a quarter of the
# width/height is the 1/16-scale scene), LSPLAT_SCALE_SIZE (1264x832), LSPLAT_SCALE_ROUTES
# ("profile average average3 lsq lsq_recompute bench"). Each route's wall time, CPU time and peak RSS
# come from /usr/bin/time; on a shared machine prefer the CPU seconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/lsplat-scale}"
shift || true
cams=("${@:-25 50}")
read -r -a cams <<<"${cams[*]}"
orbit="${LSPLAT_SCALE_ORBIT:-299}"
keep="${LSPLAT_SCALE_KEEP:-1}"
size="${LSPLAT_SCALE_SIZE:-1264x832}"
routes="${LSPLAT_SCALE_ROUTES:-profile average average3 lsq lsq_recompute bench}"
data="${LSPLAT_TEST_DATA:-$root/../shared/data}"
bin="$root/target/release/lsplat-engine"
subsets="$(IFS=,; echo "${cams[*]}")"

cd "$root"
nice cargo build --release -p lsplat-cli -p lsplat-benches --example camera_profile
timed() { # label, command...
    local log="$out/logs/$1.time"
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$log" "$@" >"${log%.time}.out" 2>&1
    read -r wall user sys kib <"$log"
    printf '%-28s wall %8.1f s  cpu %8.1f s  peak RSS %6.2f GB\n' \
        "$(basename "${log%.time}")" "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$kib / 1048576" | bc -l)"
}
mkdir -p "$out/logs"
if [ ! -f "$out/scene.toml" ]; then
    timed synth "$bin" synth --splats "$data/splats/playcanvas_biker.inria_sh0.ply" \
        --tile 3x3 --keep-every "$keep" --orbit "$orbit" --subsets "$subsets" \
        --width "${size%x*}" --height "${size#*x}" --out "$out"
    timed import "$bin" import langsplat --source "$out/language_features" --out "$out/dataset"
fi
for k in "${cams[@]}"; do
    scene="$out/scene_$k.toml"
    for r in $routes; do
        case "$r" in
        profile) timed "profile_$k" "$root/target/release/examples/camera_profile" "$scene" 0 1 ;;
        average) timed "average_$k" "$bin" solve --scene "$scene" --method average --out "$out/runs/average_$k" --force ;;
        average3) timed "average3_$k" "$bin" solve --scene "$scene" --method average --levels 1,2,3 --out "$out/runs/average3_$k" --force ;;
        lsq) timed "lsq_$k" "$bin" solve --scene "$scene" --method lsq --out "$out/runs/lsq_$k" --force ;;
        lsq_recompute) timed "lsq_recompute_$k" "$bin" solve --scene "$scene" --method lsq \
            --set render.operator_precision=recompute --out "$out/runs/lsq_recompute_$k" --force ;;
        bench) for p in f32 compact recompute; do
            timed "bench_${p}_$k" "$bin" bench --scene "$scene" --iters 20 --warmup 0 --json \
                --set render.cache=operator --set "render.operator_precision=$p"
        done ;;
        esac
    done
done
