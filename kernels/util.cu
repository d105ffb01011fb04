// util.cu — fills, exclusive scans and segment offsets shared by the other families.
#include "compat.h"

#define LS_SCAN_THREADS 256
#define LS_SCAN_ITEMS 4
#define LS_SCAN_BLOCK (LS_SCAN_THREADS * LS_SCAN_ITEMS)

#define LS_FILL(NAME, T)                                                     \
  extern "C" __global__ void NAME(T* p, u64 n, T value) {                   \
    for (u64 i = ls_global_id(); i < n; i += ls_global_stride()) p[i] = value; \
  }
LS_FILL(ls_fill_u8, unsigned char)
LS_FILL(ls_fill_u16, u16)
LS_FILL(ls_fill_u32, u32)
LS_FILL(ls_fill_u64, u64)

// Exclusive scan of LS_SCAN_BLOCK elements per block (in place allowed); the block
// total goes to block_sums[blockIdx.x] when block_sums is not null.
extern "C" __global__ void __launch_bounds__(LS_SCAN_THREADS)
    ls_scan_block(const u32* in, u32* out, u32 n, u32* block_sums) {
  __shared__ u32 warp_base[LS_SCAN_THREADS / LS_WARP_SIZE];
  __shared__ u32 block_total;
  const u64 base = (u64)blockIdx.x * LS_SCAN_BLOCK + (u64)threadIdx.x * LS_SCAN_ITEMS;
  u32 v[LS_SCAN_ITEMS];
  u32 sum = 0;
#pragma unroll
  for (int i = 0; i < LS_SCAN_ITEMS; i++) {
    v[i] = base + i < n ? in[base + i] : 0u;
    sum += v[i];
  }
  const u32 lane = ls_lane(), warp = threadIdx.x / LS_WARP_SIZE;
  u32 incl = sum;
  for (u32 d = 1; d < LS_WARP_SIZE; d *= 2) {
    u32 t = LS_SHFL_UP(incl, d);
    if (lane >= d) incl += t;
  }
  if (lane == LS_WARP_SIZE - 1) warp_base[warp] = incl;
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 run = 0;
    for (u32 w = 0; w < LS_SCAN_THREADS / LS_WARP_SIZE; w++) {
      u32 t = warp_base[w];
      warp_base[w] = run;
      run += t;
    }
    block_total = run;
  }
  __syncthreads();
  u32 excl = warp_base[warp] + incl - sum;
#pragma unroll
  for (int i = 0; i < LS_SCAN_ITEMS; i++) {
    if (base + i < n) out[base + i] = excl;
    excl += v[i];
  }
  if (block_sums != 0 && threadIdx.x == 0) block_sums[blockIdx.x] = block_total;
}

// Adds the scanned block totals to every element of each scan block.
extern "C" __global__ void ls_scan_add(u32* out, u32 n, const u32* block_offsets) {
  for (u64 i = ls_global_id(); i < n; i += ls_global_stride())
    out[i] += block_offsets[i / LS_SCAN_BLOCK];
}

// total += Σ in[0..n) in 64 bits (one atomic per block), so a count that reaches 2³²
// is detected on the host instead of wrapping in the 32-bit scan. Launch with
// LS_SUM_THREADS threads per block.
#define LS_SUM_THREADS 256
extern "C" __global__ void __launch_bounds__(LS_SUM_THREADS)
    ls_sum_u32(const u32* in, u32 n, u64* total) {
  __shared__ u64 part[LS_SUM_THREADS];
  u64 s = 0;
  for (u64 i = ls_global_id(); i < n; i += ls_global_stride()) s += in[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (u32 d = LS_SUM_THREADS / 2; d > 0; d /= 2) {
    if (threadIdx.x < d) part[threadIdx.x] += part[threadIdx.x + d];
    __syncthreads();
  }
  if (threadIdx.x == 0 && part[0] != 0) atomicAdd(total, part[0]);
}

// Offsets of the segments of sorted 64-bit keys (segment = key >> shift):
// offsets[s] = first index with segment >= s, for s in 0..=segments. n >= 1.
extern "C" __global__ void ls_segment_offsets(const u64* keys, u32 n, u32 shift, u32* offsets,
                                              u32 segments) {
  for (u64 i = ls_global_id(); i < n; i += ls_global_stride()) {
    const u32 s = (u32)(keys[i] >> shift);
    const u32 first = i == 0 ? 0u : (u32)(keys[i - 1] >> shift) + 1u;
    for (u32 t = first; t <= s; t++) offsets[t] = (u32)i;
    if (i == n - 1)
      for (u32 t = s + 1; t <= segments; t++) offsets[t] = n;
  }
}

// The memory-bandwidth probe of `bench`: reads n floats once, coalesced; each thread
// writes the sum of its grid-stride share to out[its global id], so no read is dead.
// Four independent sums keep four loads in flight per thread (one chained sum left
// the H200 at about half its bandwidth).
extern "C" __global__ void ls_read_probe(const float* in, u64 n, float* out) {
  const u64 s = ls_global_stride();
  float a = 0.0f, b = 0.0f, c = 0.0f, d = 0.0f;
  u64 i = ls_global_id();
  for (; i + 3 * s < n; i += 4 * s) {
    a += in[i];
    b += in[i + s];
    c += in[i + 2 * s];
    d += in[i + 3 * s];
  }
  for (; i < n; i += s) a += in[i];
  out[ls_global_id()] = (a + b) + (c + d);
}
