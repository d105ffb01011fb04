// loss.cu — masked L1 and cosine losses over the valid pixels of one camera.
//
// One thread per valid pixel writes its rows of d_rendered; per-block partial sums
// (double) go to `partials`, and one single-block kernel adds them in a fixed order
// and stores or accumulates the loss into its device slot. Deterministic.
#include "compat.h"

#define LS_LOSS_THREADS 256

// kind: 0 = masked L1, 1 = cosine, 2 = L1 + cosine. l1_grad = weight/(C·H·W) and
// cos_grad = weight·(1/(H·W)) as f32, computed on the host like the CPU backend.
extern "C" __global__ void __launch_bounds__(LS_LOSS_THREADS)
    ls_pixel_loss(int kind, const float* f, const u32* mask, const float* table, u32 v, u32 c,
                  float l1_grad, float cos_grad, float* d, double* partials) {
  __shared__ double s_l1[LS_LOSS_THREADS / LS_WARP_SIZE], s_cos[LS_LOSS_THREADS / LS_WARP_SIZE];
  const u64 i = ls_global_id();
  double l1 = 0.0, cs = 0.0;
  if (i < v) {
    const float* fr = f + i * c;
    const float* g = table + (u64)mask[i] * c;
    float* dr = d + i * c;
    if (kind != 1) {
      float row = 0.0f;
      for (u32 k = 0; k < c; k++) {
        const float diff = fr[k] - g[k];
        row += fabsf(diff);
        dr[k] = diff > 0.0f ? l1_grad : (diff < 0.0f ? -l1_grad : 0.0f);
      }
      l1 = (double)row;
    }
    if (kind != 0) {
      float nf = 0.0f, ng = 0.0f, dot = 0.0f;
      for (u32 k = 0; k < c; k++) nf += fr[k] * fr[k];
      for (u32 k = 0; k < c; k++) ng += g[k] * g[k];
      for (u32 k = 0; k < c; k++) dot += fr[k] * g[k];
      nf = sqrtf(nf);
      ng = sqrtf(ng);
      const float denom = fmaxf(nf * ng, LS_COS_EPS);
      const float cosv = dot / denom;
      cs = (double)(1.0f - cosv);
      const bool regular = nf * ng > LS_COS_EPS;
      for (u32 k = 0; k < c; k++) {
        const float grad = regular ? -(g[k] / denom - cosv * fr[k] / (nf * nf)) : -g[k] / denom;
        dr[k] = kind == 2 ? dr[k] + cos_grad * grad : cos_grad * grad;
      }
    }
  }
  l1 = ls_warp_sum(l1);
  cs = ls_warp_sum(cs);
  const u32 warp = threadIdx.x / LS_WARP_SIZE;
  if (ls_lane() == 0) {
    s_l1[warp] = l1;
    s_cos[warp] = cs;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double a = 0.0, b = 0.0;
    for (u32 w = 0; w < LS_LOSS_THREADS / LS_WARP_SIZE; w++) {
      a += s_l1[w];
      b += s_cos[w];
    }
    partials[2 * blockIdx.x] = a;
    partials[2 * blockIdx.x + 1] = b;
  }
}

// loss[slot] (+)= (float)((Σ l1 · l1_scale + Σ cos · cos_scale) · weight).
extern "C" __global__ void __launch_bounds__(LS_LOSS_THREADS)
    ls_loss_finish(const double* partials, u32 blocks, double l1_scale, double cos_scale,
                   double weight, float* loss, u32 slot, int accumulate) {
  __shared__ double s_l1[LS_LOSS_THREADS], s_cos[LS_LOSS_THREADS];
  double a = 0.0, b = 0.0;
  for (u32 i = threadIdx.x; i < blocks; i += LS_LOSS_THREADS) {
    a += partials[2 * i];
    b += partials[2 * i + 1];
  }
  s_l1[threadIdx.x] = a;
  s_cos[threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (u32 t = 1; t < LS_LOSS_THREADS; t++) {
      a += s_l1[t];
      b += s_cos[t];
    }
    const float value = (float)((a * l1_scale + b * cos_scale) * weight);
    loss[slot] = accumulate ? loss[slot] + value : value;
  }
}
