// v2.cu — the kernels of the langsplat-v2 plugin (LangSplatV2 sparse coefficients,
// codebook decode fused with the cosine loss, and the codebook gradient).
//
// Defines from the plugin's Rust code (src/ops.rs): LV2_CODES (codebook size C),
// LV2_K (nonzero coefficients per Gaussian), LV2_SUM_THREADS (threads of lv2_sum),
// LV2_TINY_NORM_SQ (a decoded |F|² at most this has cosine 0). Every kernel loops
// grid-stride over its items, accumulates in double in a fixed order (no atomics), and
// performs the same operations in the same order as the CPU implementation in
// src/ops/*.rs, so the simt runtime reproduces it bit for bit.
#include "compat.h"

#define LV2_CC ((u64)LV2_CODES * LV2_CODES)

// Whether logit a ranks strictly above b: larger first, NaN below every number.
__device__ __forceinline__ bool lv2_above(float a, float b) {
  return a == a && (b != b || a > b);
}

// LV2_DOT_LANES partial sums added pairwise: ((0+1)+(2+3))+((4+5)+(6+7)).
__device__ __forceinline__ double lv2_pairwise(double* acc) {
  for (u32 step = 1; step < LV2_DOT_LANES; step *= 2) {
    for (u32 i = 0; i < LV2_DOT_LANES; i += 2 * step) acc[i] += acc[i + step];
  }
  return acc[0];
}

// f64 dot product of n floats: LV2_DOT_LANES partial sums (element j into partial
// j mod LV2_DOT_LANES, in index order), then the partials added pairwise.
__device__ __forceinline__ double lv2_dot(const float* a, const float* b, u32 n) {
  double acc[LV2_DOT_LANES];
  for (u32 l = 0; l < LV2_DOT_LANES; ++l) acc[l] = 0.0;
  for (u32 j = 0; j < n; ++j) acc[j % LV2_DOT_LANES] += (double)a[j] * (double)b[j];
  return lv2_pairwise(acc);
}

// e^x for x = logit − max ≤ 0, the same operations as the CPU's exp_le0 (each
// product-sum an explicit fma, so no compiler contracts differently): n = floor(x·log2e
// + 1/2), r = x − n·ln2 in two steps, Taylor polynomial of degree LV2_EXP_DEGREE by
// Horner's rule, times 2^n (exact). 0 below LV2_EXP_MIN; NaN stays NaN.
__device__ __forceinline__ double lv2_exp(double x) {
  if (x != x) return x;
  if (x < LV2_EXP_MIN) return 0.0;
  const double coefs[LV2_EXP_DEGREE + 1] = LV2_EXP_COEFS;
  double n = floor(fma(x, LV2_LOG2E, 0.5));
  double r = fma(-n, LV2_LN2_HI, x);
  r = fma(-n, LV2_LN2_LO, r);
  double p = coefs[LV2_EXP_DEGREE];
  for (int k = (int)LV2_EXP_DEGREE - 1; k >= 0; --k) p = fma(p, r, coefs[k]);
  return ldexp(p, (int)n);
}

// The softmax over the LV2_K selected logits sl (sl[0] the largest) into sv.
__device__ __forceinline__ void lv2_softmax(const float* sl, float* sv) {
  double m = (double)sl[0];
  double e[LV2_K];
  for (u32 j = 0; j < LV2_K; ++j) e[j] = lv2_exp((double)sl[j] - m);
  double sum = 0.0;
  for (u32 j = 0; j < LV2_K; ++j) sum += e[j];
  for (u32 j = 0; j < LV2_K; ++j) sv[j] = (float)(e[j] / sum);
}

// The top LV2_K of one row of LV2_CODES logits (descending; ties to the lower index)
// into si, and the softmax over just those logits into sv.
__device__ __forceinline__ void lv2_select(const float* row, u32* si, float* sv) {
  float sl[LV2_K];
  for (u32 j = 0; j < LV2_K; ++j) {
    si[j] = 0;
    sl[j] = 0.0f;
  }
  u32 n = 0;
  for (u32 c = 0; c < LV2_CODES; ++c) {
    float l = row[c];
    if (n == LV2_K && !lv2_above(l, sl[LV2_K - 1])) continue;
    u32 pos = 0;
    while (pos < n && !lv2_above(l, sl[pos])) ++pos;
    u32 last = n < LV2_K ? n : LV2_K - 1;
    for (u32 j = last; j > pos; --j) {
      si[j] = si[j - 1];
      sl[j] = sl[j - 1];
    }
    si[pos] = c;
    sl[pos] = l;
    if (n < LV2_K) ++n;
  }
  lv2_softmax(sl, sv);
}

// One thread per Gaussian: its selection (lv2_select) and the dense row holding it.
extern "C" __global__ void lv2_topk(u32 items, const float* logits, u32* idx, float* val,
                                    float* dense) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    u32 si[LV2_K];
    float sv[LV2_K];
    lv2_select(logits + i * LV2_CODES, si, sv);
    float* d = dense + i * LV2_CODES;
    for (u32 c = 0; c < LV2_CODES; ++c) d[c] = 0.0f;
    for (u32 j = 0; j < LV2_K; ++j) {
      idx[i * LV2_K + j] = si[j];
      val[i * LV2_K + j] = sv[j];
      d[si[j]] += sv[j];
    }
  }
}

// Adam on one logit with gradient g: the engine's ls_adam with grad_scale 1,
// operation for operation (adam_row in ops/adam.rs).
__device__ __forceinline__ void lv2_adam_elem(float* p, float* m, float* v, float g,
                                              float step_size, float inv_sqrt_bc2, float b1,
                                              float b2, float eps) {
  const float mi = b1 * *m + (1.0f - b1) * g;
  const float vi = b2 * *v + (1.0f - b2) * g * g;
  *m = mi;
  *v = vi;
  *p -= step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
}

// x^n by binary powering from the low bit (pow_int in ops/adam.rs).
__device__ __forceinline__ double lv2_pow_int(double x, u32 n) {
  double r = 1.0;
  for (;;) {
    if (n & 1u) r *= x;
    n >>= 1;
    if (n == 0u) return r;
    x *= x;
  }
}

// The logits passes give each Gaussian a group of LV2_GROUP lanes: lane l holds logits
// l and l + LV2_GROUP (coalesced), the Adam updates run per logit, and the selection is
// LV2_K rounds of a group argmax. Groups are the same on every warp width.
#define LV2_GROUP 32
#define LV2_PER_LANE (LV2_CODES / LV2_GROUP)
static_assert(LV2_CODES % LV2_GROUP == 0, "a group holds LV2_CODES / LV2_GROUP logits per lane");

// Whether (a, ia) ranks before (b, ib): the larger logit (lv2_above), the lower index
// among equals — the order in which lv2_select keeps the top LV2_K.
__device__ __forceinline__ bool lv2_before(float a, u32 ia, float b, u32 ib) {
  return lv2_above(a, b) || (!lv2_above(b, a) && ia < ib);
}

// lv2_select over a group's row (x[j] is logit lane + j·LV2_GROUP): every lane of the
// group gets the same si and sv, equal to lv2_select's. Every lane of the warp must
// call it (it shuffles); lanes of a group with nothing to select pass any values.
__device__ __forceinline__ void lv2_select_group(const float* x, u32* si, float* sv) {
  const u32 lane = threadIdx.x % LV2_GROUP;
  const int leader = (int)(ls_lane() - lane);
  bool taken[LV2_PER_LANE];
  for (u32 j = 0; j < LV2_PER_LANE; ++j) taken[j] = false;
  float sl[LV2_K];
  for (u32 r = 0; r < LV2_K; ++r) {
    // This lane's best untaken logit; none is (NaN, ~0u), which every logit beats.
    float bv = __uint_as_float(0x7fc00000u);
    u32 bi = ~0u;
    for (u32 j = 0; j < LV2_PER_LANE; ++j) {
      const u32 c = lane + j * LV2_GROUP;
      if (!taken[j] && lv2_before(x[j], c, bv, bi)) {
        bv = x[j];
        bi = c;
      }
    }
    for (int d = LV2_GROUP / 2; d > 0; d /= 2) {
      const float ov = LS_SHFL_DOWN(bv, d);
      const u32 oi = LS_SHFL_DOWN(bi, d);
      if (lv2_before(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    bv = LS_SHFL(bv, leader);
    bi = LS_SHFL(bi, leader);
    si[r] = bi;
    sl[r] = bv;
    for (u32 j = 0; j < LV2_PER_LANE; ++j)
      if (bi == lane + j * LV2_GROUP) taken[j] = true;
  }
  lv2_softmax(sl, sv);
}

// A group per Gaussian with vis != 0 (the others have no gradient and are caught up
// by lv2_catch_up before they are seen): the logit gradient of its selection from
// d_val (zero off the selection; indices >= LV2_CODES are skipped), Adam step `step`
// on its LV2_CODES logits, the selection of the updated logits, and last = step. The
// loop runs while any group of the warp has a Gaussian, so every lane reaches the
// shuffles; a warp whose Gaussians are all unseen skips the step.
extern "C" __global__ void lv2_adam_select(u32 items, float* logits, float* m, float* v,
                                           u32* idx, float* val, const float* d_val,
                                           const float* vis, u32* last, u32 step,
                                           float step_size, float inv_sqrt_bc2, float b1,
                                           float b2, float eps) {
  const u32 lane = threadIdx.x % LV2_GROUP;
  const u64 group = ls_global_id() / LV2_GROUP, groups = ls_global_stride() / LV2_GROUP;
  const u64 first = group - (u64)(ls_lane() / LV2_GROUP);
  for (u64 base = first; base < items; base += groups) {
    const u64 i = base + (group - first);
    const bool live = i < items && vis[i] != 0.0f;
    if (LS_BALLOT(live) == 0) continue;
    u32* ri = idx + i * LV2_K;
    float* rv = val + i * LV2_K;
    float x[LV2_PER_LANE];
    for (u32 j = 0; j < LV2_PER_LANE; ++j) x[j] = 0.0f;
    if (live) {
      const float* rd = d_val + i * LV2_K;
      double dot = 0.0;
      for (u32 j = 0; j < LV2_K; ++j) dot += (double)rv[j] * (double)rd[j];
      for (u32 j = 0; j < LV2_PER_LANE; ++j) {
        const u32 c = lane + j * LV2_GROUP;
        float g = 0.0f;
        for (u32 k = 0; k < LV2_K; ++k)
          if (ri[k] == c) g += (float)((double)rv[k] * ((double)rd[k] - dot));
        const u64 o = i * LV2_CODES + c;
        lv2_adam_elem(logits + o, m + o, v + o, g, step_size, inv_sqrt_bc2, b1, b2, eps);
        x[j] = logits[o];
      }
    }
    u32 si[LV2_K];
    float sv[LV2_K];
    lv2_select_group(x, si, sv);
    if (live && lane < LV2_K) {
      ri[lane] = si[lane];
      rv[lane] = sv[lane];
    }
    if (live && lane == 0) last[i] = step;
  }
}

// A group per Gaussian with vis != 0 and last < target: Adam steps last+1..target
// with a zero gradient, each with its own constants (StepConstants::at), then the
// selection of the updated logits, and last = target. Equal, bit for bit, to the
// dense steps that skipped it.
extern "C" __global__ void lv2_catch_up(u32 items, float* logits, float* m, float* v, u32* idx,
                                        float* val, const float* vis, u32* last, u32 target,
                                        float lr, float b1, float b2, float eps) {
  const u32 lane = threadIdx.x % LV2_GROUP;
  const u64 group = ls_global_id() / LV2_GROUP, groups = ls_global_stride() / LV2_GROUP;
  const u64 first = group - (u64)(ls_lane() / LV2_GROUP);
  for (u64 base = first; base < items; base += groups) {
    const u64 i = base + (group - first);
    const bool live = i < items && vis[i] != 0.0f && last[i] < target;
    if (LS_BALLOT(live) == 0) continue;
    float x[LV2_PER_LANE];
    for (u32 j = 0; j < LV2_PER_LANE; ++j) x[j] = 0.0f;
    if (live) {
      const u32 from = last[i] + 1u;
      for (u32 j = 0; j < LV2_PER_LANE; ++j) {
        const u64 o = i * LV2_CODES + lane + j * LV2_GROUP;
        float p = logits[o], mo = m[o], vo = v[o];
        for (u32 t = from; t <= target; ++t) {
          const double bc1 = 1.0 - lv2_pow_int((double)b1, t);
          const double bc2 = 1.0 - lv2_pow_int((double)b2, t);
          const float step_size = (float)((double)lr / bc1);
          const float inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
          lv2_adam_elem(&p, &mo, &vo, 0.0f, step_size, inv_sqrt_bc2, b1, b2, eps);
        }
        logits[o] = p;
        m[o] = mo;
        v[o] = vo;
        x[j] = p;
      }
    }
    u32 si[LV2_K];
    float sv[LV2_K];
    lv2_select_group(x, si, sv);
    if (live && lane < LV2_K) {
      idx[i * LV2_K + lane] = si[lane];
      val[i * LV2_K + lane] = sv[lane];
    }
    if (live && lane == 0) last[i] = target;
  }
}

// One thread per Gaussian: d_val[j] += d_dense[idx[j]] (indices >= LV2_CODES skipped).
extern "C" __global__ void lv2_gather_add(u32 items, const u32* idx, const float* d_dense,
                                          float* d_val) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    for (u32 j = 0; j < LV2_K; ++j) {
      const u32 c = idx[i * LV2_K + j];
      if (c < LV2_CODES) d_val[i * LV2_K + j] += d_dense[i * LV2_CODES + c];
    }
  }
}

// One thread per Gaussian: d_logits = 0 except dl_i = w_i (d_i − Σ_j w_j d_j) at the
// selected codes, d_i = d_dense[idx_i]. Indices ≥ LV2_CODES are skipped.
extern "C" __global__ void lv2_topk_backward(u32 items, const u32* idx, const float* val,
                                             const float* d_dense, float* d_logits) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    const u32* ri = idx + i * LV2_K;
    const float* rv = val + i * LV2_K;
    const float* dd = d_dense + i * LV2_CODES;
    float* out = d_logits + i * LV2_CODES;
    for (u32 c = 0; c < LV2_CODES; ++c) out[c] = 0.0f;
    double dot = 0.0;
    for (u32 j = 0; j < LV2_K; ++j) {
      double d = ri[j] < LV2_CODES ? (double)dd[ri[j]] : 0.0;
      dot += (double)rv[j] * d;
    }
    for (u32 j = 0; j < LV2_K; ++j) {
      if (ri[j] >= LV2_CODES) continue;
      out[ri[j]] += (float)((double)rv[j] * ((double)dd[ri[j]] - dot));
    }
  }
}

// items = rows·C + C² + rows: bg = table·codebookᵀ, then gram = codebook·codebookᵀ,
// then gnorm = |table row|. LV2_DOT_LANES lanes per entry: lane p sums lv2_dot's
// partial p (elements p, p + LV2_DOT_LANES, … in order), and the partials are added by
// the same pairwise tree through shuffles, so each entry is lv2_dot's, bit for bit.
// The loop runs while any entry of the warp is left, so every lane reaches the shuffles.
extern "C" __global__ void lv2_prep(u32 items, const float* codebook, const float* table,
                                    float* bg, float* gram, float* gnorm, u32 dim) {
  const u64 rows = ((u64)items - LV2_CC) / (LV2_CODES + 1);
  const u64 nbg = rows * LV2_CODES;
  const u32 part = threadIdx.x % LV2_DOT_LANES;
  const u64 group = ls_global_id() / LV2_DOT_LANES, groups = ls_global_stride() / LV2_DOT_LANES;
  const u64 first = group - (u64)(ls_lane() / LV2_DOT_LANES);
  for (u64 base = first; base < items; base += groups) {
    const u64 e = base + (group - first);
    const bool live = e < items;
    const float *x = codebook, *y = codebook;
    if (!live) {
    } else if (e < nbg) {
      x = table + (e / LV2_CODES) * dim;
      y = codebook + (e % LV2_CODES) * dim;
    } else if (e < nbg + LV2_CC) {
      x = codebook + ((e - nbg) / LV2_CODES) * dim;
      y = codebook + ((e - nbg) % LV2_CODES) * dim;
    } else {
      x = y = table + (e - nbg - LV2_CC) * dim;
    }
    double acc = 0.0;
    if (live)
      for (u32 j = part; j < dim; j += LV2_DOT_LANES) acc += (double)x[j] * (double)y[j];
    for (u32 step = 1; step < LV2_DOT_LANES; step *= 2) acc += LS_SHFL_DOWN(acc, step);
    if (!live || part != 0) continue;
    if (e < nbg)
      bg[e] = (float)acc;
    else if (e < nbg + LV2_CC)
      gram[e - nbg] = (float)acc;
    else
      gnorm[e - nbg - LV2_CC] = (float)sqrt(acc);
  }
}

// Per valid pixel: rho = 1 − cos(Bᵀw, g), d_w, and the codebook-gradient coefficients
// (c1, c2); zero weights are skipped like the CPU code skips them. A group of
// LV2_GROUP lanes per pixel: lane l keeps Gw's entries l and l + LV2_GROUP (each summed
// over the codes in order, as the CPU does), the dot products' partials are summed by
// every lane alike (their terms come from shuffles), and the lanes write d_w's entries
// coalesced. The loop runs while any pixel of the warp is left.
extern "C" __global__ void lv2_cosine(u32 items, const float* w, const u32* mask,
                                      const float* bg, const float* gram, const float* gnorm,
                                      float* d_w, float* rho, float* coef, float grad_scale) {
  const u32 lane = threadIdx.x % LV2_GROUP;
  const int leader = (int)(ls_lane() - lane);
  const u64 group = ls_global_id() / LV2_GROUP, groups = ls_global_stride() / LV2_GROUP;
  const u64 first = group - (u64)(ls_lane() / LV2_GROUP);
  for (u64 base = first; base < items; base += groups) {
    const u64 p = base + (group - first);
    const bool live = p < items;
    const float* wp = w + (live ? p : 0) * LV2_CODES;
    const u64 r = live ? mask[p] : 0;
    const float* b = bg + r * LV2_CODES;
    const double g = live ? (double)gnorm[r] : 0.0;
    double gw[LV2_PER_LANE];
    for (u32 j = 0; j < LV2_PER_LANE; ++j) gw[j] = 0.0;
    double pa[LV2_DOT_LANES], pq[LV2_DOT_LANES];
    for (u32 l = 0; l < LV2_DOT_LANES; ++l) pa[l] = pq[l] = 0.0;
    if (live) {
      for (u32 c = 0; c < LV2_CODES; ++c) {
        if (wp[c] == 0.0f) continue;
        const double wc = (double)wp[c];
        pa[c % LV2_DOT_LANES] += wc * (double)b[c];
        const float* gr = gram + (u64)c * LV2_CODES;
        for (u32 j = 0; j < LV2_PER_LANE; ++j)
          gw[j] = fma(wc, (double)gr[lane + j * LV2_GROUP], gw[j]);
      }
    }
    for (u32 c = 0; c < LV2_CODES; ++c) {
      const double gwc = LS_SHFL(gw[c / LV2_GROUP], leader + (int)(c % LV2_GROUP));
      if (live && wp[c] != 0.0f) pq[c % LV2_DOT_LANES] += (double)wp[c] * gwc;
    }
    if (!live) continue;
    const double a = lv2_pairwise(pa), q = lv2_pairwise(pq);
    float* dw = d_w + p * LV2_CODES;
    if (q <= LV2_TINY_NORM_SQ || g == 0.0) {
      for (u32 j = 0; j < LV2_PER_LANE; ++j) dw[lane + j * LV2_GROUP] = 0.0f;
      if (lane == 0) {
        rho[p] = 1.0f;
        coef[2 * p] = 0.0f;
        coef[2 * p + 1] = 0.0f;
      }
      continue;
    }
    const double inv = 1.0 / (sqrt(q) * g);
    const double scale = (double)grad_scale;
    const double c1 = -scale * inv;
    const double c2 = scale * a * inv / q;
    if (lane == 0) {
      rho[p] = (float)(1.0 - a * inv);
      coef[2 * p] = (float)c1;
      coef[2 * p + 1] = (float)c2;
    }
    for (u32 j = 0; j < LV2_PER_LANE; ++j) {
      const u32 m = lane + j * LV2_GROUP;
      dw[m] = (float)(c1 * (double)b[m] + c2 * gw[j]);
    }
  }
}

// u[r,k] = Σ_{p: mask_p = r} c1_p w_pk and s[k,m] = Σ_p c2_p w_pk w_pm, as a tiled
// reduction: items = LV2_ACC_BLOCKS·LV2_ACC_THREADS (blocks of 4·C threads). Block b sums
// the pixels [b·V/B, (b+1)·V/B) in order into its own slice of `part` (f64, rows·C + C²
// entries): thread t owns s[k, m0 .. m0 + C/4) for k = t / 4, m0 = (t mod 4)·C/4, and
// u[r, t mod C] for the rows r ≡ ⌊t / C⌋ (mod 4). The last block to finish (a ticket
// from `count`) adds the slices in block order into u and s and resets `count` to 0.
// Every sum has a fixed order, so the result depends neither on the device nor on
// which block finishes last.
extern "C" __global__ void __launch_bounds__(LV2_ACC_THREADS)
    lv2_acc(u32 items, const float* w, const u32* mask, const float* coef, float* u, float* s,
            float* part_f32, u32* count, u32 pixels, u32 rows) {
  (void)items;
  __shared__ u32 ticket;
  double* part = (double*)part_f32;
  const u64 nu = (u64)rows * LV2_CODES, ne = nu + LV2_CC;
  double* mine = part + (u64)blockIdx.x * ne;
  const u32 t = threadIdx.x;
  const u64 p0 = (u64)pixels * blockIdx.x / gridDim.x;
  const u64 p1 = (u64)pixels * (blockIdx.x + 1) / gridDim.x;
  const u32 k = t / 4, m0 = (t % 4) * (LV2_CODES / 4);
  const u32 uk = t % LV2_CODES, ur = t / LV2_CODES;
  const u32 ustep = LV2_ACC_THREADS / LV2_CODES;
  for (u64 r = ur; r < rows; r += ustep) mine[r * LV2_CODES + uk] = 0.0;
  double acc[LV2_CODES / 4];
  for (u32 i = 0; i < LV2_CODES / 4; ++i) acc[i] = 0.0;
  for (u64 p = p0; p < p1; ++p) {
    const float* wp = w + p * LV2_CODES;
    const float c1 = coef[2 * p], c2 = coef[2 * p + 1];
    if (c1 != 0.0f && mask[p] % ustep == ur) {
      double* o = mine + (u64)mask[p] * LV2_CODES + uk;
      *o += (double)c1 * (double)wp[uk];
    }
    if (c2 == 0.0f || wp[k] == 0.0f) continue;
    const double tk = (double)c2 * (double)wp[k];
    for (u32 i = 0; i < LV2_CODES / 4; ++i) acc[i] = fma(tk, (double)wp[m0 + i], acc[i]);
  }
  for (u32 i = 0; i < LV2_CODES / 4; ++i) mine[nu + (u64)k * LV2_CODES + m0 + i] = acc[i];
  __threadfence();
  __syncthreads();
  if (t == 0) ticket = atomicAdd(count, 1u);
  __syncthreads();
  if (ticket != gridDim.x - 1) return;
  __threadfence();
  for (u64 e = t; e < ne; e += blockDim.x) {
    double sum = 0.0;
    for (u32 b = 0; b < gridDim.x; ++b) sum += part[(u64)b * ne + e];
    if (e < nu)
      u[e] = (float)sum;
    else
      s[e - nu] = (float)sum;
  }
  if (t == 0) *count = 0;
}

// items = C·dim, one thread per entry: d_codebook[k,j] += Σ_r u[r,k] table[r,j]
// + Σ_m s[k,m] codebook[m,j] (zero coefficients skipped).
extern "C" __global__ void lv2_codebook_grad(u32 items, const float* u, const float* s,
                                             const float* table, const float* codebook,
                                             float* d_codebook, u32 rows) {
  u64 dim = (u64)items / LV2_CODES;
  for (u64 e = ls_global_id(); e < items; e += ls_global_stride()) {
    u64 k = e / dim, j = e % dim;
    double acc = 0.0;
    for (u64 r = 0; r < rows; ++r) {
      float cf = u[r * LV2_CODES + k];
      if (cf != 0.0f) acc += (double)cf * (double)table[r * dim + j];
    }
    for (u64 m = 0; m < LV2_CODES; ++m) {
      float cf = s[k * LV2_CODES + m];
      if (cf != 0.0f) acc += (double)cf * (double)codebook[m * dim + j];
    }
    d_codebook[e] = (float)((double)d_codebook[e] + acc);
  }
}

// One block of LV2_SUM_THREADS threads: loss[slot] (+)= scale · Σ rho, summed in a
// fixed order (thread t takes t, t + T, …; then a tree over the threads).
extern "C" __global__ void lv2_sum(u32 items, const float* rho, float* loss, u32 n, u32 slot,
                                   float scale, u32 accumulate) {
  __shared__ double part[LV2_SUM_THREADS];
  (void)items;
  double a = 0.0;
  for (u32 i = threadIdx.x; i < n; i += LV2_SUM_THREADS) a += (double)rho[i];
  part[threadIdx.x] = a;
  __syncthreads();
  for (u32 w = LV2_SUM_THREADS / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float v = (float)(part[0] * (double)scale);
    loss[slot] = accumulate ? loss[slot] + v : v;
  }
}

// One thread per word: bit b of bits[i] is set where probe[LV2_VIS_WORD·i + b] != 0
// (bits past Gaussian n stay clear).
extern "C" __global__ void lv2_vis_bits(u32 items, const float* probe, u32* bits, u32 n) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    u32 word = 0;
    for (u32 b = 0; b < LV2_VIS_WORD; ++b) {
      u64 g = i * LV2_VIS_WORD + b;
      if (g < n && probe[g] != 0.0f) word |= 1u << b;
    }
    bits[i] = word;
  }
}

// One thread per Gaussian: vis[g] = 1 where bit g of bits is set.
extern "C" __global__ void lv2_vis_or(u32 items, const u32* bits, float* vis) {
  for (u64 g = ls_global_id(); g < items; g += ls_global_stride()) {
    if ((bits[g / LV2_VIS_WORD] >> (g % LV2_VIS_WORD)) & 1u) vis[g] = 1.0f;
  }
}
