// bins.cu — tile binning and a stable LSD radix sort of (tile | depth) keys.
//
// Intersections are emitted Gaussian-major (ascending Gaussian id), and the sort is
// stable, so equal keys keep ascending ids: the order is (tile, depth, id), exactly
// the CPU backend's.
#include "compat.h"

#define LS_RS_THREADS 256
#define LS_RS_ITEMS 8
#define LS_RS_CHUNK (LS_RS_THREADS * LS_RS_ITEMS)
#define LS_RS_BINS 256
#define LS_RS_WARPS (LS_RS_THREADS / LS_WARP_SIZE)

// Tiles covered by each projected rectangle [x0, y0, x1, y1). counts has n + 1
// entries; the last is left as is (zero) so an exclusive scan yields the total.
extern "C" __global__ void ls_count_tiles(const u32* rects, u32 n, u32* counts) {
  for (u64 g = ls_global_id(); g < n; g += ls_global_stride()) {
    const u32* r = rects + 4 * g;
    counts[g] = (r[2] - r[0]) * (r[3] - r[1]);
  }
}

// Monotone (total-order) bits of a float: flips negatives, sets the sign of positives.
__device__ __forceinline__ u32 ls_order_bits(float f) {
  u32 b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Writes key = tile << 32 | depth bits and value = Gaussian id for every intersection,
// tiles of a rectangle row by row from offsets[g].
extern "C" __global__ void ls_emit_keys(const u32* rects, const float* splats, const u32* offsets,
                                        u32 n, u32 tiles_x, u64* keys, u32* values) {
  for (u64 g = ls_global_id(); g < n; g += ls_global_stride()) {
    const u32* r = rects + 4 * g;
    const u32 depth = ls_order_bits(splats[8 * g + 6]);
    u32 o = offsets[g];
    for (u32 ty = r[1]; ty < r[3]; ty++)
      for (u32 tx = r[0]; tx < r[2]; tx++, o++) {
        keys[o] = ((u64)(ty * tiles_x + tx) << 32) | depth;
        values[o] = (u32)g;
      }
  }
}

// Radix pass 1: digit histogram of each block's chunk, stored digit-major:
// hist[digit * blocks + block], so an exclusive scan gives every (digit, block) its
// first output position.
extern "C" __global__ void __launch_bounds__(LS_RS_THREADS)
    ls_radix_histogram(const u64* keys, u32 n, u32 shift, u32* hist) {
  __shared__ u32 h[LS_RS_BINS];
  for (u32 i = threadIdx.x; i < LS_RS_BINS; i += LS_RS_THREADS) h[i] = 0;
  __syncthreads();
  const u64 base = (u64)blockIdx.x * LS_RS_CHUNK;
  for (u32 j = 0; j < LS_RS_ITEMS; j++) {
    const u64 idx = base + (u64)j * LS_RS_THREADS + threadIdx.x;
    if (idx < n) atomicAdd(&h[(u32)(keys[idx] >> shift) & (LS_RS_BINS - 1)], 1u);
  }
  __syncthreads();
  for (u32 d = threadIdx.x; d < LS_RS_BINS; d += LS_RS_THREADS)
    hist[(u64)d * gridDim.x + blockIdx.x] = h[d];
}

// Radix pass 2: stable scatter. Each block walks its chunk in rounds of
// LS_RS_THREADS consecutive keys; within a round, a key's rank among equal digits is
// found with ballots (warp multi-split) plus per-warp digit counts.
extern "C" __global__ void __launch_bounds__(LS_RS_THREADS)
    ls_radix_scatter(const u64* keys_in, const u32* vals_in, u32 n, u32 shift,
                     const u32* scanned, u64* keys_out, u32* vals_out) {
  __shared__ u32 next[LS_RS_BINS];
  __shared__ u32 warp_count[LS_RS_WARPS][LS_RS_BINS];
  __shared__ u32 round_total[LS_RS_BINS];
  for (u32 d = threadIdx.x; d < LS_RS_BINS; d += LS_RS_THREADS)
    next[d] = scanned[(u64)d * gridDim.x + blockIdx.x];
  const u32 warp = threadIdx.x / LS_WARP_SIZE;
  const u64 base = (u64)blockIdx.x * LS_RS_CHUNK;
  for (u32 j = 0; j < LS_RS_ITEMS; j++) {
    for (u32 i = threadIdx.x; i < LS_RS_WARPS * LS_RS_BINS; i += LS_RS_THREADS)
      (&warp_count[0][0])[i] = 0;
    __syncthreads();
    const u64 idx = base + (u64)j * LS_RS_THREADS + threadIdx.x;
    const bool valid = idx < n;
    const u64 key = valid ? keys_in[idx] : 0ull;
    const u32 digit = (u32)(key >> shift) & (LS_RS_BINS - 1);
    ls_lane_mask peers = LS_BALLOT(valid);
    for (u32 bit = 0; bit < 8; bit++) {
      const bool set = (digit >> bit) & 1u;
      const ls_lane_mask b = LS_BALLOT(set);
      peers &= set ? b : ~b;
    }
    const u32 rank = LS_POPC(peers & ls_lanemask_lt());
    if (valid && rank == 0) warp_count[warp][digit] = LS_POPC(peers);
    __syncthreads();
    for (u32 d = threadIdx.x; d < LS_RS_BINS; d += LS_RS_THREADS) {
      u32 run = 0;
      for (u32 w = 0; w < LS_RS_WARPS; w++) {
        const u32 c = warp_count[w][d];
        warp_count[w][d] = run;
        run += c;
      }
      round_total[d] = run;
    }
    __syncthreads();
    if (valid) {
      const u32 pos = next[digit] + warp_count[warp][digit] + rank;
      keys_out[pos] = key;
      vals_out[pos] = vals_in[idx];
    }
    __syncthreads();
    for (u32 d = threadIdx.x; d < LS_RS_BINS; d += LS_RS_THREADS) next[d] += round_total[d];
  }
}
