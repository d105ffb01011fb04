#!/usr/bin/env bash
# .ci/ort-gpu-bundle.sh — ONNX Runtime's CUDA provider for a lent GPU machine whose
# transfers are capped (the `device` tool carries 64 MiB a call): downloads PyPI's
# onnxruntime-gpu wheel (CUDA 13), keeps the device code of one architecture in
# libonnxruntime_providers_cuda.so (the other architectures' fatbin payloads are zeroed,
# their headers kept, so the driver still finds the one it needs) and packs the three
# libraries xz-compressed into the git-ignored .ort/ (about 61 MB for sm_90).
# On the GPU machine: unpack them into one folder and point ORT_DYLIB_PATH (or
# onnx.runtime) at its libonnxruntime.so.*, with the CUDA 13 / cuDNN 9 libraries on
# LD_LIBRARY_PATH (the H200 image has them in its Python environment's nvidia/ packages).
#
#   bash .ci/ort-gpu-bundle.sh [SM] [VERSION]     # default 90 and 1.31.1
set -euo pipefail
cd "$(dirname "$0")/.."
sm=${1:-90}
ver=${2:-1.31.1}
py=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  -d "$tmp" "onnxruntime-gpu==$ver"
(cd "$tmp" && unzip -q -o ./*.whl 'onnxruntime/capi/*.so*')
grep -qx '/.ort/' .git/info/exclude 2>/dev/null || echo '/.ort/' >> .git/info/exclude
rm -rf .ort && mkdir .ort
capi="$tmp/onnxruntime/capi"
"$py" - "$capi/libonnxruntime_providers_cuda.so" "$sm" <<'PY'
import struct, subprocess, sys
path, keep = sys.argv[1], int(sys.argv[2])
# Where .nv_fatbin lies in the file (readelf: offset and size columns).
line = [l for l in subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True).stdout.splitlines() if ".nv_fatbin" in l][0]
f = line.split("]", 1)[1].split()
off, size = int(f[3], 16), int(f[4], 16)
data = bytearray(open(path, "rb").read())
p, end, kept, zeroed = off, off + size, 0, 0
while p < end:
    magic, _ver, hsz, fsz = struct.unpack_from("<IHHQ", data, p)
    if magic != 0xBA55ED50:  # padding between containers
        p += 8
        continue
    q, qend = p + hsz, p + hsz + fsz
    while q < qend:  # entries: kind, version, header size, payload size, ..., arch at +28
        _kind, _ever, ehsz, psz = struct.unpack_from("<HHIQ", data, q)
        arch = struct.unpack_from("<I", data, q + 28)[0]
        if arch == keep:
            kept += psz
        else:
            data[q + ehsz:q + ehsz + psz] = bytes(psz)
            zeroed += psz
        q += ehsz + psz
    p = qend
if kept == 0:
    sys.exit(f"no sm_{keep} code in {path}")
open(path, "wb").write(data)
print(f"sm_{keep}: kept {kept / 1e6:.1f} MB of device code, zeroed {zeroed / 1e6:.1f} MB")
PY
for f in "$capi"/libonnxruntime.so.* "$capi/libonnxruntime_providers_cuda.so"; do
  xz -T0 -6 -c "$f" > ".ort/$(basename "$f").xz"
done
cp "$capi/libonnxruntime_providers_shared.so" .ort/
du -sh .ort
