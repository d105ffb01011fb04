// walk.h — the front-to-back walk of one tile's sorted list, shared by compositing,
// its backward and the operator build. One block per tile, one thread per pixel of
// the tile's pixel-set range; splats are staged in shared memory batch by batch.
//
// Rules (lsplat_device::Backend): skip σ < 0 and α < LS_ALPHA_THRESHOLD, clamp α to
// LS_MAX_ALPHA, stop *before* the pair that brings T to ≤ LS_TRANSMITTANCE_STOP.
#pragma once
#include "compat.h"

#define LS_TILE_PIXELS (LS_TILE_SIZE * LS_TILE_SIZE)

// A batch of splats in shared memory.
template <int N>
struct LsBatch {
  float x[N], y[N], a[N], b[N], c[N], o[N];
  u32 g[N];
};

// Thread `slot` stages sorted entry `k` (when k < end) into the batch.
template <int N>
__device__ __forceinline__ void ls_stage(LsBatch<N>& s, int slot, const float* splats,
                                         const u32* sorted, u32 k, u32 end) {
  if (k < end) {
    const u32 g = sorted[k];
    const float* p = splats + 8 * (u64)g;
    s.g[slot] = g;
    s.x[slot] = p[0];
    s.y[slot] = p[1];
    s.a[slot] = p[2];
    s.b[slot] = p[3];
    s.c[slot] = p[4];
    s.o[slot] = p[5];
  }
}

// The pixel state of one thread.
struct LsPixel {
  float px, py, t;
  bool done;
};

// Pixel `i` of the tile's range [p0, p0 + np) of the pixel set.
__device__ __forceinline__ LsPixel ls_pixel(const u32* pixels, u32 p0, u32 np, u32 width, u32 i) {
  LsPixel p;
  p.t = 1.0f;
  p.done = i >= np;
  const u32 pix = p.done ? 0u : pixels[p0 + i];
  p.px = (float)(pix % width) + 0.5f;
  p.py = (float)(pix / width) + 0.5f;
  return p;
}

// Walks entries 0..cnt of a staged batch; calls visit(j, g, w) per contributing pair.
template <int N, typename Visit>
__device__ __forceinline__ void ls_walk(const LsBatch<N>& s, int cnt, LsPixel& p, Visit visit) {
  for (int j = 0; j < cnt && !p.done; j++) {
    const float dx = s.x[j] - p.px;
    const float dy = s.y[j] - p.py;
    const float sigma = 0.5f * (s.a[j] * dx * dx + s.c[j] * dy * dy) + s.b[j] * dx * dy;
    if (sigma < 0.0f) continue;
    const float alpha = fminf(s.o[j] * expf(-sigma), LS_MAX_ALPHA);
    if (alpha < LS_ALPHA_THRESHOLD) continue;
    const float next_t = p.t * (1.0f - alpha);
    if (next_t <= LS_TRANSMITTANCE_STOP) {
      p.done = true;
      break;
    }
    visit(j, s.g[j], alpha * p.t);
    p.t = next_t;
  }
}
