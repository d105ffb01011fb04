// raster.cu — direct C-channel compositing and its feature-only backward.
//
// Launch: one block of LS_TILE_PIXELS threads per tile (grid.x = tiles); the
// forward covers channels in chunks of LS_CHUNK (grid.y = ceil(C / LS_CHUNK)).
#include "walk.h"

#define LS_CHUNK (LS_CHANNELS < 32 ? LS_CHANNELS : 32)
#define LS_BWD_BATCH 32

// out[row] = Σ w·x[g] for every pixel row of the set (overwrites).
extern "C" __global__ void __launch_bounds__(LS_TILE_PIXELS)
    ls_rasterize(const float* splats, const u32* bin_offsets, const u32* sorted, const u32* pixels,
                 const u32* pix_offsets, u32 width, const float* x, float* out) {
  __shared__ LsBatch<LS_TILE_PIXELS> s;
  const u32 tile = blockIdx.x;
  const u32 c0 = blockIdx.y * LS_CHUNK;
  const u32 p0 = pix_offsets[tile], np = pix_offsets[tile + 1] - p0;
  LsPixel p = ls_pixel(pixels, p0, np, width, threadIdx.x);
  float acc[LS_CHUNK];
#pragma unroll
  for (u32 k = 0; k < LS_CHUNK; k++) acc[k] = 0.0f;
  const u32 b0 = bin_offsets[tile], b1 = bin_offsets[tile + 1];
  for (u32 start = b0; start < b1; start += LS_TILE_PIXELS) {
    if (__syncthreads_and(p.done)) break;
    ls_stage(s, threadIdx.x, splats, sorted, start + threadIdx.x, b1);
    __syncthreads();
    const int cnt = (int)min((u32)LS_TILE_PIXELS, b1 - start);
    ls_walk(s, cnt, p, [&](int, u32 g, float w) {
      const float* xg = x + (u64)g * LS_CHANNELS + c0;
#pragma unroll
      for (u32 k = 0; k < LS_CHUNK; k++)
        if (c0 + k < LS_CHANNELS) acc[k] += w * xg[k];
    });
  }
  if (threadIdx.x < np) {
    float* o = out + (u64)(p0 + threadIdx.x) * LS_CHANNELS + c0;
#pragma unroll
    for (u32 k = 0; k < LS_CHUNK; k++)
      if (c0 + k < LS_CHANNELS) o[k] = acc[k];
  }
}

// d_x[g] += Σ_pixels w·d_out[row]. Per batch of LS_BWD_BATCH splats, pixel threads
// write their weights to shared memory; then threads take (splat, channel) pairs,
// reduce over the tile's pixels in registers and issue one atomic per channel per
// (tile, splat) that any pixel of the tile used.
extern "C" __global__ void __launch_bounds__(LS_TILE_PIXELS)
    ls_rasterize_backward(const float* splats, const u32* bin_offsets, const u32* sorted,
                          const u32* pixels, const u32* pix_offsets, u32 width,
                          const float* d_out, float* d_x) {
  __shared__ LsBatch<LS_BWD_BATCH> s;
  __shared__ float s_w[LS_BWD_BATCH][LS_TILE_PIXELS];
  __shared__ int s_used[LS_BWD_BATCH];
  const u32 tile = blockIdx.x;
  const u32 p0 = pix_offsets[tile], np = pix_offsets[tile + 1] - p0;
  LsPixel p = ls_pixel(pixels, p0, np, width, threadIdx.x);
  const u32 b0 = bin_offsets[tile], b1 = bin_offsets[tile + 1];
  for (u32 start = b0; start < b1; start += LS_BWD_BATCH) {
    if (__syncthreads_and(p.done)) break;
    if (threadIdx.x < LS_BWD_BATCH) {
      ls_stage(s, threadIdx.x, splats, sorted, start + threadIdx.x, b1);
      s_used[threadIdx.x] = 0;
    }
    const int cnt = (int)min((u32)LS_BWD_BATCH, b1 - start);
    for (int j = 0; j < cnt; j++) s_w[j][threadIdx.x] = 0.0f;
    __syncthreads();
    ls_walk(s, cnt, p, [&](int j, u32, float w) {
      s_w[j][threadIdx.x] = w;
      s_used[j] = 1;
    });
    __syncthreads();
    for (u32 item = threadIdx.x; item < (u32)cnt * LS_CHANNELS; item += LS_TILE_PIXELS) {
      const u32 j = item / LS_CHANNELS, k = item % LS_CHANNELS;
      if (!s_used[j]) continue;
      float sum = 0.0f;
      const float* d = d_out + (u64)p0 * LS_CHANNELS + k;
      // Only pixels that used the splat contribute (an Inf in another pixel's
      // gradient must not become 0·Inf = NaN here; the CPU backend skips them too).
      for (u32 q = 0; q < np; q++) {
        const float w = s_w[j][q];
        if (w != 0.0f) sum += w * d[(u64)q * LS_CHANNELS];
      }
      ls_atomic_add(d_x + (u64)s.g[j] * LS_CHANNELS + k, sum);
    }
  }
}
