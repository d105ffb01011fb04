# .ci/gpu/common.sh — sourced from .dev/ by the run scripts on the GPU machine: unpacks
# the xz-compressed binaries (with Python's lzma: the machine may lack unxz), puts the
# toolkit's NVRTC on the loader path, keeps compiled kernels in /tmp/kc, and sets B to
# the engine.
if compgen -G 'bin/*.xz' >/dev/null; then
  python3 -c "import lzma, os, shutil, sys
for f in sys.argv[1:]:
    shutil.copyfileobj(lzma.open(f), open(f[:-3], 'wb')); os.remove(f)" bin/*.xz
fi
chmod +x bin/*
nv=$(dirname "$(find /usr/local/cuda*/ -name 'libnvrtc.so*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:$nv" LSPLAT_KERNEL_CACHE=/tmp/kc
B=$PWD/bin/lsplat-engine
