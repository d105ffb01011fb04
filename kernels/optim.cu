// optim.cu — LangSplat V1 normalisation (and its backward) and fused Adam.
//
// Same operation order as lsplat-cpu's optim.rs; with --fmad=false the results are
// bitwise equal.
#include "compat.h"

// out_i = x_i / (|x_i| + LS_NORM_EPS), one thread per row.
extern "C" __global__ void ls_normalize(const float* x, u32 rows, u32 c, float* out) {
  for (u64 r = ls_global_id(); r < rows; r += ls_global_stride()) {
    const float* xr = x + r * c;
    float s = 0.0f;
    for (u32 k = 0; k < c; k++) s += xr[k] * xr[k];
    const float inv = 1.0f / (sqrtf(s) + LS_NORM_EPS);
    for (u32 k = 0; k < c; k++) out[r * c + k] = xr[k] * inv;
  }
}

// d_x = d/(r+ε) − x·(x·d)/(r·(r+ε)²) (overwrites), and d/(r+ε) at r = 0.
extern "C" __global__ void ls_normalize_backward(const float* x, const float* d, u32 rows, u32 c,
                                                 float* d_x) {
  for (u64 r = ls_global_id(); r < rows; r += ls_global_stride()) {
    const float* xr = x + r * c;
    const float* dr = d + r * c;
    float s = 0.0f;
    for (u32 k = 0; k < c; k++) s += xr[k] * xr[k];
    const float n = sqrtf(s);
    const float a = 1.0f / (n + LS_NORM_EPS);
    float b = 0.0f;
    if (n > 0.0f) {
      float dot = 0.0f;
      for (u32 k = 0; k < c; k++) dot += xr[k] * dr[k];
      b = dot * a * a / n;
    }
    for (u32 k = 0; k < c; k++) d_x[r * c + k] = dr[k] * a - xr[k] * b;
  }
}

// One fused Adam step (PyTorch's formulation); step_size = lr / (1 − β₁ᵗ) and
// inv_sqrt_bc2 = 1 / sqrt(1 − β₂ᵗ) come from the host in double, rounded to f32.
extern "C" __global__ void ls_adam(float* p, const float* g, float* m, float* v, u64 n,
                                   float step_size, float inv_sqrt_bc2, float b1, float b2,
                                   float eps, float grad_scale) {
  for (u64 i = ls_global_id(); i < n; i += ls_global_stride()) {
    const float gi = g[i] * grad_scale;
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
}

// Zeroes channel groups: values is [rows, groups·group_len]; group g of row r becomes
// 0 where keep[r·groups + g] == 0. One thread per (row, group).
extern "C" __global__ void ls_mask_groups(float* values, const unsigned char* keep, u64 rows,
                                          u32 groups, u32 group_len) {
  const u64 total = rows * groups;
  for (u64 i = ls_global_id(); i < total; i += ls_global_stride()) {
    if (keep[i] != 0) continue;
    float* v = values + i * group_len;
    for (u32 k = 0; k < group_len; k++) v[k] = 0.0f;
  }
}
