// robust_cosine.cu — the kernels of the robust-cosine example plugin.
//
// Per valid pixel p with rendered F and target G: c = cos(F, G), r = 1 − c, and the
// loss ρ(r) = s·ln(1 + r/s) (Cauchy), whose gradient dρ/dr = 1/(1 + r/s) shrinks for
// pixels far from their target (outliers: wrong masks, occlusions). RC_SUM_THREADS
// comes from the plugin's Rust code as a define.
#include "compat.h"

// One thread per valid pixel: writes d = grad_scale·ρ'(r)·∂r/∂F and rho[p] = ρ(r).
extern "C" __global__ void robust_cosine_pixels(u32 items, const float* f, const u32* mask,
                                                const float* table, float* d, float* rho,
                                                u32 c, float grad_scale, float s) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    const float* fr = f + i * c;
    const float* g = table + (u64)mask[i] * c;
    float* dr = d + i * c;
    float nf2 = 0.0f, ng2 = 0.0f, dot = 0.0f;
    for (u32 j = 0; j < c; ++j) nf2 += fr[j] * fr[j];
    for (u32 j = 0; j < c; ++j) ng2 += g[j] * g[j];
    for (u32 j = 0; j < c; ++j) dot += fr[j] * g[j];
    float nf = sqrtf(nf2), ng = sqrtf(ng2);
    float denom = fmaxf(nf * ng, LS_COS_EPS);
    float cosv = dot / denom;
    float r = 1.0f - cosv;
    float q = 1.0f + r / s;
    rho[i] = s * logf(q);
    float k = grad_scale / q;
    bool full = nf * ng > LS_COS_EPS;
    for (u32 j = 0; j < c; ++j) {
      float gr = full ? -(g[j] / denom - cosv * fr[j] / (nf * nf)) : -g[j] / denom;
      dr[j] = k * gr;
    }
  }
}

// One block of RC_SUM_THREADS threads: loss[slot] (+)= scale · Σ rho, summed in a
// fixed order (thread t takes t, t + T, …; then a tree over the threads).
extern "C" __global__ void robust_cosine_sum(u32 items, const float* rho, float* loss, u32 n,
                                             u32 slot, float scale, u32 accumulate) {
  __shared__ double part[RC_SUM_THREADS];
  (void)items;
  double a = 0.0;
  for (u32 i = threadIdx.x; i < n; i += RC_SUM_THREADS) a += (double)rho[i];
  part[threadIdx.x] = a;
  __syncthreads();
  for (u32 w = RC_SUM_THREADS / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float v = (float)(part[0] * (double)scale);
    loss[slot] = accumulate ? loss[slot] + v : v;
  }
}
