// operator.cu — the cached operator W of one camera: build (count pass, fill pass to
// CSR rows of the pixel set, front to back), the CSC copy for the transposed
// product (built by bins.cu's stable radix sort of column keys), weight/index
// compaction, and the SpMM kernels (dense and k-sparse input).
#include "walk.h"

// Count pass: counts[row] = contributing pairs of each pixel row (counts has
// rows + 1 entries; the last stays zero so an exclusive scan gives the total).
extern "C" __global__ void __launch_bounds__(LS_TILE_PIXELS)
    ls_op_count(const float* splats, const u32* bin_offsets, const u32* sorted, const u32* pixels,
                const u32* pix_offsets, u32 width, u32* counts) {
  __shared__ LsBatch<LS_TILE_PIXELS> s;
  const u32 tile = blockIdx.x;
  const u32 p0 = pix_offsets[tile], np = pix_offsets[tile + 1] - p0;
  LsPixel p = ls_pixel(pixels, p0, np, width, threadIdx.x);
  const u32 b0 = bin_offsets[tile], b1 = bin_offsets[tile + 1];
  u32 n = 0;
  for (u32 start = b0; start < b1; start += LS_TILE_PIXELS) {
    if (__syncthreads_and(p.done)) break;
    ls_stage(s, threadIdx.x, splats, sorted, start + threadIdx.x, b1);
    __syncthreads();
    ls_walk(s, (int)min((u32)LS_TILE_PIXELS, b1 - start), p, [&](int, u32, float) { n++; });
  }
  if (threadIdx.x < np) counts[p0 + threadIdx.x] = n;
}

// Fill pass: writes each row's (Gaussian, weight) pairs from row_ptr[row], and the
// row of every entry (for the CSC build).
extern "C" __global__ void __launch_bounds__(LS_TILE_PIXELS)
    ls_op_fill(const float* splats, const u32* bin_offsets, const u32* sorted, const u32* pixels,
               const u32* pix_offsets, u32 width, const u32* row_ptr, u32* cols, float* weights,
               u32* entry_rows) {
  __shared__ LsBatch<LS_TILE_PIXELS> s;
  const u32 tile = blockIdx.x;
  const u32 p0 = pix_offsets[tile], np = pix_offsets[tile + 1] - p0;
  LsPixel p = ls_pixel(pixels, p0, np, width, threadIdx.x);
  const u32 b0 = bin_offsets[tile], b1 = bin_offsets[tile + 1];
  const u32 row = p0 + threadIdx.x;
  u32 o = threadIdx.x < np ? row_ptr[row] : 0u;
  for (u32 start = b0; start < b1; start += LS_TILE_PIXELS) {
    if (__syncthreads_and(p.done)) break;
    ls_stage(s, threadIdx.x, splats, sorted, start + threadIdx.x, b1);
    __syncthreads();
    ls_walk(s, (int)min((u32)LS_TILE_PIXELS, b1 - start), p, [&](int, u32 g, float w) {
      cols[o] = g;
      weights[o] = w;
      entry_rows[o] = row;
      o++;
    });
  }
}

// Column keys (Gaussian ids) of the CSR entries, for the stable sort to CSC.
extern "C" __global__ void ls_op_col_keys(const u32* cols, u32 nnz, u64* keys, u32* order) {
  for (u64 e = ls_global_id(); e < nnz; e += ls_global_stride()) {
    keys[e] = cols[e];
    order[e] = (u32)e;
  }
}

// CSC gather: entry e' of the column-sorted order takes row and weight of CSR entry
// order[e'] (rows stay ascending within a column: the sort is stable).
extern "C" __global__ void ls_op_gather(const u32* order, const u32* entry_rows,
                                        const float* weights, u32 nnz, u32* csc_rows,
                                        float* csc_weights) {
  for (u64 e = ls_global_id(); e < nnz; e += ls_global_stride()) {
    const u32 src = order[e];
    csc_rows[e] = entry_rows[src];
    csc_weights[e] = weights[src];
  }
}

// Compaction of indices and weights.
extern "C" __global__ void ls_to_u16(const u32* in, u32 n, u16* out) {
  for (u64 i = ls_global_id(); i < n; i += ls_global_stride()) out[i] = (u16)in[i];
}
extern "C" __global__ void ls_to_f16(const float* in, u32 n, u16* out) {
  for (u64 i = ls_global_id(); i < n; i += ls_global_stride()) out[i] = ls_f32_to_f16(in[i]);
}
extern "C" __global__ void ls_to_bf16(const float* in, u32 n, u16* out) {
  for (u64 i = ls_global_id(); i < n; i += ls_global_stride()) out[i] = ls_f32_to_bf16(in[i]);
}

__device__ __forceinline__ float ls_weight(float w) { return w; }
struct LsF16 { u16 bits; };
struct LsBf16 { u16 bits; };
__device__ __forceinline__ float ls_weight(LsF16 w) { return ls_f16_to_f32(w.bits); }
__device__ __forceinline__ float ls_weight(LsBf16 w) { return ls_bf16_to_f32(w.bits); }

// With `grouped` (the host sets it where shuffles are cheap), rows of at most
// LS_SPMM_GROUPED_MAX channels are walked by a group of LS_SPMM_LANES lanes each (a row's
// entries are read coalesced, and a long row is shared by 32 lanes instead of
// serialising one thread); otherwise by one thread per (row, channel), where the threads
// of a row read the same entry at once. Launch-shape constants: the host
// (src/operator.rs) mirrors them.
#define LS_SPMM_LANES 32
#define LS_SPMM_GROUPED_MAX 4
#define LS_SPMM_UNROLL 4

// acc[k] (k < LS_SPMM_GROUPED_MAX, only k < channels used) += Σ w_e·x[idx_e·C + k] over
// entries e = first, first + stride, … below end, in order, LS_SPMM_UNROLL at a time
// with every load issued before the first product (a long row is latency-bound
// otherwise).
template <typename I, typename W>
__device__ __forceinline__ void ls_spmm_strided(const I* idx, const W* w, const float* x,
                                                u32 channels, u32 e, u32 end, u32 stride,
                                                float* acc) {
  for (; e + (LS_SPMM_UNROLL - 1) * stride < end; e += LS_SPMM_UNROLL * stride) {
    float we[LS_SPMM_UNROLL];
    const float* xr[LS_SPMM_UNROLL];
    for (u32 j = 0; j < LS_SPMM_UNROLL; j++) {
      we[j] = ls_weight(w[e + j * stride]);
      xr[j] = x + (u64)idx[e + j * stride] * channels;
    }
    float xv[LS_SPMM_UNROLL][LS_SPMM_GROUPED_MAX];
    for (u32 j = 0; j < LS_SPMM_UNROLL; j++)
      for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++) xv[j][k] = k < channels ? xr[j][k] : 0.0f;
    for (u32 j = 0; j < LS_SPMM_UNROLL; j++)
      for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++)
        if (k < channels) acc[k] += we[j] * xv[j][k];
  }
  for (; e < end; e += stride) {
    const float we = ls_weight(w[e]);
    const float* xr = x + (u64)idx[e] * channels;
    for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++)
      if (k < channels) acc[k] += we * xr[k];
  }
}

// out[r·C + k] (+)= Σ_e w_e·x[idx_e·C + k] over the entries of compressed row r. Used
// for CSR (forward) and CSC (transposed) alike. Grouped narrow rows: lane l of a row's
// group sums entries l, l + 32, … in order, then the lanes' sums are added by a fixed
// tree (lane l += lane l + d for d = 16, 8, 4, 2, 1) — the same order on every warp
// width; rows of more than `long_min` entries are left to ls_spmm_long. Otherwise one
// thread per (row, channel) sums its row's entries in order.
template <typename I, typename W>
__device__ __forceinline__ void ls_spmm(const u32* ptr, const I* idx, const W* w, const float* x,
                                        float* out, u32 rows, u32 channels, int accumulate,
                                        int grouped, u32 long_min) {
  if (!grouped || channels > LS_SPMM_GROUPED_MAX) {
    const u64 total = (u64)rows * channels;
    for (u64 t = ls_global_id(); t < total; t += ls_global_stride()) {
      const u32 r = (u32)(t / channels), k = (u32)(t % channels);
      float acc = 0.0f;
      for (u32 e = ptr[r]; e < ptr[r + 1]; e++) acc += ls_weight(w[e]) * x[(u64)idx[e] * channels + k];
      out[t] = accumulate ? out[t] + acc : acc;
    }
    return;
  }
  const u32 lane = threadIdx.x % LS_SPMM_LANES;
  const u64 group = ls_global_id() / LS_SPMM_LANES;
  const u64 groups = ls_global_stride() / LS_SPMM_LANES;
  // The loop runs while any group of this warp has a row, so every lane of the warp
  // reaches the shuffles (a group past the end, or on a long row, writes nothing).
  const u64 first = group - (u64)(ls_lane() / LS_SPMM_LANES);
  for (u64 base = first; base < rows; base += groups) {
    const u64 r = base + (group - first);
    const u32 start = r < rows ? ptr[r] : 0, end = r < rows ? ptr[r + 1] : 0;
    const bool live = r < rows && end - start <= long_min;
    float acc[LS_SPMM_GROUPED_MAX];
    for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++) acc[k] = 0.0f;
    if (live) ls_spmm_strided(idx, w, x, channels, start + lane, end, LS_SPMM_LANES, acc);
    for (u32 d = LS_SPMM_LANES / 2; d > 0; d /= 2)
      for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++) acc[k] += LS_SHFL_DOWN(acc[k], d);
    if (live && lane == 0) {
      float* o = out + r * channels;
      for (u32 k = 0; k < channels; k++) o[k] = accumulate ? o[k] + acc[k] : acc[k];
    }
  }
}

// The rows ls_spmm leaves (listed in long_rows): a block of LS_SPMM_LONG_THREADS threads
// per row; thread t sums entries t, t + LS_SPMM_LONG_THREADS, … in order, then the block
// adds the threads' sums by a fixed tree in shared memory. One block holds the few
// Gaussians that cover thousands of pixels, which would otherwise set the time of the
// whole transposed product.
#define LS_SPMM_LONG_THREADS 256
template <typename I, typename W>
__device__ __forceinline__ void ls_spmm_long(const u32* ptr, const I* idx, const W* w,
                                             const float* x, float* out, const u32* long_rows,
                                             u32 n_long, u32 channels, int accumulate) {
  __shared__ float part[LS_SPMM_GROUPED_MAX][LS_SPMM_LONG_THREADS];
  const u32 t = threadIdx.x;
  for (u32 b = blockIdx.x; b < n_long; b += gridDim.x) {
    const u32 r = long_rows[b];
    float acc[LS_SPMM_GROUPED_MAX];
    for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++) acc[k] = 0.0f;
    ls_spmm_strided(idx, w, x, channels, ptr[r] + t, ptr[r + 1], LS_SPMM_LONG_THREADS, acc);
    for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++) part[k][t] = acc[k];
    __syncthreads();
    for (u32 d = LS_SPMM_LONG_THREADS / 2; d > 0; d /= 2) {
      if (t < d)
        for (u32 k = 0; k < LS_SPMM_GROUPED_MAX; k++) part[k][t] += part[k][t + d];
      __syncthreads();
    }
    if (t == 0) {
      float* o = out + (u64)r * channels;
      for (u32 k = 0; k < channels; k++) o[k] = accumulate ? o[k] + part[k][0] : part[k][0];
    }
    __syncthreads();
  }
}

#define LS_SPMM(NAME, I, W)                                                               \
  extern "C" __global__ void NAME(const u32* ptr, const I* idx, const W* w, const float* x, \
                                  float* out, u32 rows, u32 channels, int accumulate,     \
                                  int grouped, u32 long_min) {                            \
    ls_spmm<I, W>(ptr, idx, w, x, out, rows, channels, accumulate, grouped, long_min);     \
  }                                                                                       \
  extern "C" __global__ void __launch_bounds__(LS_SPMM_LONG_THREADS)                      \
      NAME##_long(const u32* ptr, const I* idx, const W* w, const float* x, float* out,   \
                  const u32* long_rows, u32 n_long, u32 channels, int accumulate) {       \
    ls_spmm_long<I, W>(ptr, idx, w, x, out, long_rows, n_long, channels, accumulate);      \
  }
LS_SPMM(ls_spmm_u16_f32, u16, float)
LS_SPMM(ls_spmm_u16_f16, u16, LsF16)
LS_SPMM(ls_spmm_u16_bf16, u16, LsBf16)
LS_SPMM(ls_spmm_u32_f32, u32, float)
LS_SPMM(ls_spmm_u32_f16, u32, LsF16)
LS_SPMM(ls_spmm_u32_bf16, u32, LsBf16)

// Sparse-input SpMM: x ([N, C]) given by k (column, value) pairs per Gaussian, `idx`
// and `val` ([N, k]). out[r·C + c] = Σ_e w_e·Σ_j [idx[g_e·k + j] = c]·val[g_e·k + j]
// over the entries of CSR row r (overwritten); one thread per (row, channel), entries
// in order, so without a repeated column in a row of `idx` the result is bitwise
// ls_spmm of the scattered dense x. A column ≥ C matches no channel (adds nothing).
template <typename I, typename W>
__device__ __forceinline__ void ls_spmm_sparse(const u32* ptr, const I* cols, const W* w,
                                               const u32* idx, const float* val, float* out,
                                               u32 rows, u32 k, u32 channels) {
  const u64 total = (u64)rows * channels;
  for (u64 t = ls_global_id(); t < total; t += ls_global_stride()) {
    const u32 r = (u32)(t / channels), c = (u32)(t % channels);
    float acc = 0.0f;
    u32 e = ptr[r];
    const u32 end = ptr[r + 1];
    // LS_SPMM_UNROLL entries at a time, their columns and weights loaded first (the
    // pairs' loads depend on the columns); the sum keeps entry order.
    for (; e + LS_SPMM_UNROLL <= end; e += LS_SPMM_UNROLL) {
      u64 p[LS_SPMM_UNROLL];
      float we[LS_SPMM_UNROLL], x[LS_SPMM_UNROLL];
      for (u32 i = 0; i < LS_SPMM_UNROLL; i++) {
        p[i] = (u64)cols[e + i] * k;
        we[i] = ls_weight(w[e + i]);
        x[i] = 0.0f;
      }
      for (u32 i = 0; i < LS_SPMM_UNROLL; i++)
        for (u32 j = 0; j < k; j++)
          if (idx[p[i] + j] == c) x[i] += val[p[i] + j];
      for (u32 i = 0; i < LS_SPMM_UNROLL; i++) acc += we[i] * x[i];
    }
    for (; e < end; e++) {
      const u64 p = (u64)cols[e] * k;
      float x = 0.0f;
      for (u32 j = 0; j < k; j++)
        if (idx[p + j] == c) x += val[p + j];
      acc += ls_weight(w[e]) * x;
    }
    out[t] = acc;
  }
}

// Its transpose restricted to the pairs: d_val[g·k + j] += Σ_e w_e·d_out[r_e·C +
// idx[g·k + j]] over the entries of CSC column g; one thread per (column, pair), rows
// ascending, so the result is bitwise ls_spmm's transposed product gathered at idx. A
// pair whose column is ≥ C gets nothing.
template <typename I, typename W>
__device__ __forceinline__ void ls_spmm_t_sparse(const u32* ptr, const I* rows_of, const W* w,
                                                 const u32* idx, const float* d_out, float* d_val,
                                                 u32 cols, u32 k, u32 channels) {
  const u64 total = (u64)cols * k;
  for (u64 t = ls_global_id(); t < total; t += ls_global_stride()) {
    const u32 g = (u32)(t / k), c = idx[t];
    if (c >= channels) continue;
    float acc = 0.0f;
    u32 e = ptr[g];
    const u32 end = ptr[g + 1];
    for (; e + LS_SPMM_UNROLL <= end; e += LS_SPMM_UNROLL) {
      float we[LS_SPMM_UNROLL], d[LS_SPMM_UNROLL];
      for (u32 i = 0; i < LS_SPMM_UNROLL; i++) {
        we[i] = ls_weight(w[e + i]);
        d[i] = d_out[(u64)rows_of[e + i] * channels + c];
      }
      for (u32 i = 0; i < LS_SPMM_UNROLL; i++) acc += we[i] * d[i];
    }
    for (; e < end; e++) acc += ls_weight(w[e]) * d_out[(u64)rows_of[e] * channels + c];
    d_val[t] += acc;
  }
}

#define LS_SPMM_SPARSE(NAME, I, W)                                                          \
  extern "C" __global__ void NAME(const u32* ptr, const I* cols, const W* w, const u32* idx, \
                                  const float* val, float* out, u32 rows, u32 k,            \
                                  u32 channels) {                                           \
    ls_spmm_sparse<I, W>(ptr, cols, w, idx, val, out, rows, k, channels);                    \
  }
LS_SPMM_SPARSE(ls_spmm_sparse_u16_f32, u16, float)
LS_SPMM_SPARSE(ls_spmm_sparse_u16_f16, u16, LsF16)
LS_SPMM_SPARSE(ls_spmm_sparse_u16_bf16, u16, LsBf16)
LS_SPMM_SPARSE(ls_spmm_sparse_u32_f32, u32, float)
LS_SPMM_SPARSE(ls_spmm_sparse_u32_f16, u32, LsF16)
LS_SPMM_SPARSE(ls_spmm_sparse_u32_bf16, u32, LsBf16)

#define LS_SPMM_T_SPARSE(NAME, I, W)                                                        \
  extern "C" __global__ void NAME(const u32* ptr, const I* rows_of, const W* w,              \
                                  const u32* idx, const float* d_out, float* d_val,         \
                                  u32 cols, u32 k, u32 channels) {                          \
    ls_spmm_t_sparse<I, W>(ptr, rows_of, w, idx, d_out, d_val, cols, k, channels);           \
  }
LS_SPMM_T_SPARSE(ls_spmm_t_sparse_u16_f32, u16, float)
LS_SPMM_T_SPARSE(ls_spmm_t_sparse_u16_f16, u16, LsF16)
LS_SPMM_T_SPARSE(ls_spmm_t_sparse_u16_bf16, u16, LsBf16)
LS_SPMM_T_SPARSE(ls_spmm_t_sparse_u32_f32, u32, float)
LS_SPMM_T_SPARSE(ls_spmm_t_sparse_u32_f16, u32, LsF16)
LS_SPMM_T_SPARSE(ls_spmm_t_sparse_u32_bf16, u32, LsBf16)
