#!/usr/bin/env bash
# .ci/nvrtc.sh — make a libnvrtc available for the kernel compile test
# (crates/lsplat-gpu/tests/nvrtc_compile.rs), without a CUDA toolkit or GPU.
#
# Creates (or reuses) the gitignored virtual environment .venv at the repository
# root, installs NVIDIA's NVRTC wheel into it, and finds its lib folder.
#
#   source .ci/nvrtc.sh      # exports LD_LIBRARY_PATH (prepended) and LSPLAT_NVRTC_LIB
#   bash .ci/nvrtc.sh        # prints `export LD_LIBRARY_PATH=...` for eval
#
# Environment: NVRTC_WHEEL (default nvidia-cuda-nvrtc==13.5.37), PYTHON (default
# python3), LSPLAT_VENV (default <repo>/.venv). Exit status non-zero on failure.
# Then run e.g.:  LSPLAT_REQUIRE_NVRTC=1 cargo test -p lsplat-gpu --features cuda --test nvrtc_compile

_lsplat_nvrtc() {
  local root venv py wheel lib
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || return 1
  venv="${LSPLAT_VENV:-$root/.venv}"
  py="${PYTHON:-python3}"
  wheel="${NVRTC_WHEEL:-nvidia-cuda-nvrtc==13.5.37}"
  if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" >&2 || return 1
  fi
  if ! "$venv/bin/python" -m pip show -q nvidia-cuda-nvrtc >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install -q "$wheel" >&2 || return 1
  fi
  lib="$(find "$venv" -name 'libnvrtc.so*' ! -name '*builtins*' -print -quit 2>/dev/null)"
  if [ -z "$lib" ]; then
    echo "nvrtc.sh: libnvrtc.so not found under $venv" >&2
    return 1
  fi
  LSPLAT_NVRTC_LIB="$(dirname "$lib")"
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  _lsplat_nvrtc || return 1
  export LSPLAT_NVRTC_LIB
  export LD_LIBRARY_PATH="$LSPLAT_NVRTC_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  unset -f _lsplat_nvrtc
else
  set -euo pipefail
  _lsplat_nvrtc
  echo "export LD_LIBRARY_PATH=\"$LSPLAT_NVRTC_LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
fi
