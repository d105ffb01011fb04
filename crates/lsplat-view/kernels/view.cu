// view.cu — the viewer's per-pixel kernels: a frame's pictures made on the device,
// so only the finished RGB8 picture (and the relevancy map) comes back to the host.
//
// Every kernel is one thread per item (a pixel, or a word of the packed picture),
// grid-stride. A pixel's colour is held as one u32, r | g << 8 | b << 16. The
// arithmetic follows the viewer's host code operation for operation (the kernels
// are compiled without contracted multiply-adds), so simt gives the host's bits.
#include "compat.h"

// The viewer's `round_u8`: round half up, saturating at 0 and 255, NaN to 0.
__device__ inline u32 view_round_u8(float v) {
  float c = v >= 256.0f ? 256.0f : v;
  if (!(c >= 0.0f)) return 0u;
  u32 i = (u32)c;
  u32 r = i + ((c - (float)i) >= 0.5f ? 1u : 0u);
  return r > 255u ? 255u : r;
}

// `round_u8(v.clamp(0, 1) * 255)` (NaN gives 0 both ways).
__device__ inline u32 view_unit_u8(float v) {
  if (!(v == v)) return 0u;
  return view_round_u8(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f);
}

__device__ inline u32 view_pack(u32 r, u32 g, u32 b) { return r | (g << 8) | (b << 16); }

// Every Gaussian's colour seen from the eye (ex, ey, ez) into the first four values
// of its row of `rows` ([items, stride]): max(Σ c_k·Y_k(d) + 0.5, 0) per channel,
// then 1 (lsplat_render::colour's `eval`, operation for operation). `rest` holds k
// coefficients per channel, channel-major; `f` the basis factors C0, C1, C2[5],
// C3[7]; deg ≤ 3.
extern "C" __global__ void view_sh(u32 items, const float* means, const float* dc,
                                   const float* rest, const float* f, float* rows, u32 stride,
                                   u32 k, u32 deg, float ex, float ey, float ez) {
  for (u64 g = ls_global_id(); g < items; g += ls_global_stride()) {
    float dx = means[g * 3] - ex, dy = means[g * 3 + 1] - ey, dz = means[g * 3 + 2] - ez;
    float n = sqrtf(dx * dx + dy * dy + dz * dz);
    float x = 0.0f, y = 0.0f, z = 0.0f;
    if (n > 0.0f) {
      x = dx / n;
      y = dy / n;
      z = dz / n;
    }
    float b[15];
    for (int i = 0; i < 15; ++i) b[i] = 0.0f;
    if (deg >= 1) {
      b[0] = -f[1] * y;
      b[1] = f[1] * z;
      b[2] = -f[1] * x;
    }
    if (deg >= 2) {
      float xx = x * x, yy = y * y, zz = z * z;
      b[3] = f[2] * x * y;
      b[4] = f[3] * y * z;
      b[5] = f[4] * (2.0f * zz - xx - yy);
      b[6] = f[5] * x * z;
      b[7] = f[6] * (xx - yy);
      if (deg >= 3) {
        b[8] = f[7] * y * (3.0f * xx - yy);
        b[9] = f[8] * x * y * z;
        b[10] = f[9] * y * (4.0f * zz - xx - yy);
        b[11] = f[10] * z * (2.0f * zz - 3.0f * xx - 3.0f * yy);
        b[12] = f[11] * x * (4.0f * zz - xx - yy);
        b[13] = f[12] * z * (xx - yy);
        b[14] = f[13] * x * (xx - 3.0f * yy);
      }
    }
    u32 used = (deg + 1) * (deg + 1) - 1;
    if (used > k) used = k;
    float* row = rows + g * stride;
    for (u32 ch = 0; ch < 3; ++ch) {
      const float* c = rest + (g * 3 + ch) * k;
      float v = f[0] * dc[g * 3 + ch];
      for (u32 i = 0; i < used; ++i) v += b[i] * c[i];
      row[ch] = fmaxf(v + 0.5f, 0.0f);
    }
    row[3] = 1.0f;
  }
}

// One band: pixel q of the band (image order from pixel `base` of the frame) is row
// source[q] of the rasterizer's tile-ordered rows `out` ([rows, stride]). Writes its
// colour to px[base + q] and, when keep > 0, channels 3 .. 3 + keep (the opacity
// and what follows) to vals[(base + q) * keep ..]. A source past `rows` gives zeros.
extern "C" __global__ void view_pixels(u32 items, const float* out, const u32* source, u32* px,
                                       float* vals, u32 stride, u32 base, u32 keep, u32 rows) {
  for (u64 q = ls_global_id(); q < items; q += ls_global_stride()) {
    u32 s = source[q];
    u64 p = (u64)base + q;
    if (s >= rows) {
      px[p] = 0u;
      for (u32 j = 0; j < keep; ++j) vals[p * keep + j] = 0.0f;
      continue;
    }
    const float* r = out + (u64)s * stride;
    px[p] = view_pack(view_unit_u8(r[0]), view_unit_u8(r[1]), view_unit_u8(r[2]));
    for (u32 j = 0; j < keep; ++j) vals[p * keep + j] = r[3 + j];
  }
}

// A linear level's dot products: y = channels 4 .. 4 + k of the pixel's row,
// dots[(base + q) * t + j] = (y · targets[j]) / |y| (zeros where |y| = 0), summed in
// index order as the host's `Linear::dots`.
extern "C" __global__ void view_dots(u32 items, const float* out, const u32* source,
                                     const float* targets, float* dots, u32 stride, u32 base,
                                     u32 k, u32 t, u32 rows) {
  for (u64 q = ls_global_id(); q < items; q += ls_global_stride()) {
    u32 s = source[q];
    float* o = dots + ((u64)base + q) * t;
    for (u32 j = 0; j < t; ++j) o[j] = 0.0f;
    if (s >= rows) continue;
    const float* y = out + (u64)s * stride + 4;
    float n2 = 0.0f;
    for (u32 c = 0; c < k; ++c) n2 += y[c] * y[c];
    if (!(n2 > 0.0f)) continue;
    float inv = 1.0f / sqrtf(n2);
    for (u32 j = 0; j < t; ++j) {
      const float* tau = targets + (u64)j * k;
      float d = 0.0f;
      for (u32 c = 0; c < k; ++c) d += y[c] * tau[c];
      o[j] = d * inv;
    }
  }
}

// The code table's grid: cell index and fractions of a code (the host's `locate`).
struct ViewCell {
  u32 i[3];
  float f[3];
};

__device__ inline ViewCell view_locate(const float* code, const float* grid, u32 cells) {
  ViewCell c;
  for (int k = 0; k < 3; ++k) {
    float u = (code[k] - grid[k]) / grid[3 + k];
    u = u != u ? u : fminf(fmaxf(u, 0.0f), (float)cells);
    u32 cell = u >= 0.0f ? (u32)u : 0u;  // NaN casts to 0 as on the host
    if (cell > cells - 1) cell = cells - 1;
    c.i[k] = cell;
    c.f[k] = u - (float)cell;
  }
  return c;
}

// Marks the table cell of every pixel's code (vals: 4 per pixel, the opacity then
// the 3-D code) in the bit set `bits`; grid = [lo 3, step 3].
extern "C" __global__ void view_cells(u32 items, const float* vals, const float* grid, u32* bits,
                                      u32 cells) {
  for (u64 p = ls_global_id(); p < items; p += ls_global_stride()) {
    ViewCell c = view_locate(vals + p * 4 + 1, grid, cells);
    u32 cell = (c.i[0] * cells + c.i[1]) * cells + c.i[2];
    atomicOr(bits + (cell >> 5), 1u << (cell & 31u));
  }
}

__device__ inline float view_lerp(float x, float y, float w) { return x + w * (y - x); }

// The table's trilinear interpolation at every pixel's code: t = 1 (a relevancy
// table: the host's `lookup`) or t = 3 (three dot products: its corner sums).
extern "C" __global__ void view_lookup(u32 items, const float* vals, const float* grid,
                                       const float* table, float* out, u32 cells, u32 t) {
  u64 r = (u64)cells + 1;
  for (u64 p = ls_global_id(); p < items; p += ls_global_stride()) {
    ViewCell c = view_locate(vals + p * 4 + 1, grid, cells);
    u64 v = ((u64)c.i[0] * r + c.i[1]) * r + c.i[2];
    if (t == 1) {
      u64 a = r * r, b = r;
      float c00 = view_lerp(table[v], table[v + a], c.f[0]);
      float c01 = view_lerp(table[v + 1], table[v + a + 1], c.f[0]);
      float c10 = view_lerp(table[v + b], table[v + a + b], c.f[0]);
      float c11 = view_lerp(table[v + b + 1], table[v + a + b + 1], c.f[0]);
      out[p] = view_lerp(view_lerp(c00, c10, c.f[1]), view_lerp(c01, c11, c.f[1]), c.f[2]);
      continue;
    }
    float acc[3] = {0.0f, 0.0f, 0.0f};
    for (u32 k = 0; k < 8; ++k) {
      u32 x = k & 1u, y = (k >> 1) & 1u, z = (k >> 2) & 1u;
      float w = (x ? c.f[0] : 1.0f - c.f[0]) * (y ? c.f[1] : 1.0f - c.f[1]);
      w = w * (z ? c.f[2] : 1.0f - c.f[2]);
      u64 at = (v + x * r * r + y * r + z) * 3;
      for (u32 j = 0; j < 3 && j < t; ++j) acc[j] += w * table[at + j];
    }
    for (u32 j = 0; j < 3 && j < t; ++j) out[p * t + j] = acc[j];
  }
}

// LangSplat's relevancy of five dot products per pixel (four canonical phrases, then
// the query): min_j 1 / (1 + exp(VIEW_TEMPERATURE · (s_j − s_q))).
extern "C" __global__ void view_relevancy(u32 items, const float* dots, float* map) {
  for (u64 p = ls_global_id(); p < items; p += ls_global_stride()) {
    const float* d = dots + p * 5;
    float m = __uint_as_float(0x7f800000u);  // +inf
    for (int j = 0; j < 4; ++j) {
      float v = 1.0f / (1.0f + expf(VIEW_TEMPERATURE * (d[j] - d[4])));
      m = fminf(m, v);
    }
    map[p] = m;
  }
}

// Google's turbo colour map, in double as the host's `turbo`.
__device__ inline u32 view_turbo_channel(double v) {
  if (!(v == v)) return 0u;
  double c = v < 0.0 ? 0.0 : (v > 1.0 ? 1.0 : v);
  return (u32)round(c * 255.0);
}

__device__ inline u32 view_turbo(float t) {
  float tc = t != t ? t : fminf(fmaxf(t, 0.0f), 1.0f);
  double x = (double)tc;
  double x2 = x * x, x3 = x * x * x;
  double x4 = x2 * x2, x5 = x2 * x3;
  double r = 0.13572138 + 4.6153926 * x - 42.66032258 * x2 + 132.13108234 * x3 -
             152.94239396 * x4 + 59.28637943 * x5;
  double g = 0.09140261 + 2.19418839 * x + 4.84296658 * x2 - 14.18503333 * x3 +
             4.27729857 * x4 + 2.82956604 * x5;
  double b = 0.1066733 + 12.64194608 * x - 60.58204836 * x2 + 110.36276771 * x3 -
             89.90310912 * x4 + 27.34824973 * x5;
  return view_pack(view_turbo_channel(r), view_turbo_channel(g), view_turbo_channel(b));
}

// The relevancy heat map over the colours: turbo above 0.5 (scaled to `top`), the
// colours at 30 % below.
extern "C" __global__ void view_heat(u32 items, const u32* px, const float* map, u32* out,
                                     float top) {
  float span = fmaxf(top - 0.5f, 1e-6f);
  for (u64 p = ls_global_id(); p < items; p += ls_global_stride()) {
    float r = map[p];
    if (r > 0.5f) {
      out[p] = view_turbo((r - 0.5f) / span);
      continue;
    }
    u32 c = px[p];
    out[p] = view_pack(view_round_u8((float)(c & 255u) * 0.3f),
                       view_round_u8((float)((c >> 8) & 255u) * 0.3f),
                       view_round_u8((float)((c >> 16) & 255u) * 0.3f));
  }
}

// The PCA colours of three dot products per pixel, scaled by the opacity
// (vals[p * keep]); pca = [offset 3, lo 3, hi 3]. Black where the opacity ≤ 1e-6.
extern "C" __global__ void view_pca(u32 items, const float* dots, const float* vals,
                                    const float* pca, u32* out, u32 t, u32 keep) {
  for (u64 p = ls_global_id(); p < items; p += ls_global_stride()) {
    float alpha = vals[p * keep];
    if (alpha <= VIEW_ALPHA_MIN) {
      out[p] = 0u;
      continue;
    }
    float a = fminf(alpha, 1.0f);
    u32 ch[3];
    for (int k = 0; k < 3; ++k) {
      float v = (dots[p * t + k] - pca[k] - pca[3 + k]) / (pca[6 + k] - pca[3 + k]);
      float c = v != v ? v : fminf(fmaxf(v, 0.0f), 1.0f);
      ch[k] = view_round_u8(c * a * 255.0f);
    }
    out[p] = view_pack(ch[0], ch[1], ch[2]);
  }
}

// The picture as RGB8 bytes, four to a word (little-endian): word w holds bytes
// 4w .. 4w + 3 of the `pixels`·3 bytes.
extern "C" __global__ void view_bytes(u32 items, const u32* px, u32* bytes, u32 pixels) {
  u64 total = (u64)pixels * 3;
  for (u64 w = ls_global_id(); w < items; w += ls_global_stride()) {
    u32 word = 0u;
    for (u32 j = 0; j < 4; ++j) {
      u64 b = w * 4 + j;
      if (b >= total) break;
      u32 c = px[b / 3];
      word |= ((c >> (8u * (u32)(b % 3))) & 255u) << (8u * j);
    }
    bytes[w] = word;
  }
}

// ---- LangSplat's segmentation of a relevancy map (the host's `lerf::box_filter`,
// `blend`, `threshold` and `majority_vote`, operation for operation) ----

// The reflect-101 index of p in 0 .. n.
__device__ inline u64 view_reflect101(long long p, long long n) {
  if (n == 1) return 0;
  while (p < 0 || p >= n) p = p < 0 ? -p : 2 * (n - 1) - p;
  return (u64)p;
}

// The k × k box (window offsets −k/2 .. k − 1 − k/2, reflect-101), horizontal pass:
// row y's running window sums in double into hsum (one thread per row).
extern "C" __global__ void view_box_rows(u32 items, const float* map, double* hsum, u32 w,
                                         u32 k) {
  long long a = k / 2, n = w;
  for (u64 y = ls_global_id(); y < items; y += ls_global_stride()) {
    const float* row = map + y * w;
    double* out = hsum + y * w;
    double s = -0.0;
    for (u32 j = 0; j < k; ++j) s += (double)row[view_reflect101((long long)j - a, n)];
    for (u32 x = 0; x < w; ++x) {
      out[x] = s;
      if (x + 1 < w)
        s += (double)row[view_reflect101((long long)x + k - a, n)] -
             (double)row[view_reflect101((long long)x - a, n)];
    }
  }
}

// The vertical pass (one thread per column) and the blend 0.5·(box + map).
extern "C" __global__ void view_box_cols(u32 items, const float* map, const double* hsum,
                                         float* blended, u32 w, u32 h, u32 k) {
  long long a = k / 2, n = h;
  double norm = (double)k * (double)k;
  for (u64 x = ls_global_id(); x < items; x += ls_global_stride()) {
    double acc = 0.0;
    for (u32 j = 0; j < k; ++j) acc += hsum[view_reflect101((long long)j - a, n) * w + x];
    for (u32 y = 0; y < h; ++y) {
      u64 p = (u64)y * w + x;
      float f = (float)(acc / norm);
      blended[p] = 0.5f * (f + map[p]);
      if (y + 1 < h)
        acc += hsum[view_reflect101((long long)y + k - a, n) * w + x] -
               hsum[view_reflect101((long long)y - a, n) * w + x];
    }
  }
}

// One block of VIEW_REDUCE threads: mm[0] = the minimum of v[0 .. n], mm[1] = the
// maximum of v − mm[0] (min and max do not depend on the order).
extern "C" __global__ void view_minmax(u32 items, const float* v, float* mm, u32 n) {
  __shared__ float part[VIEW_REDUCE];
  (void)items;
  u32 t = threadIdx.x;
  float m = __uint_as_float(0x7f800000u);  // +inf
  for (u32 i = t; i < n; i += VIEW_REDUCE) m = fminf(m, v[i]);
  part[t] = m;
  __syncthreads();
  for (u32 s = VIEW_REDUCE / 2; s > 0; s /= 2) {
    if (t < s) part[t] = fminf(part[t], part[t + s]);
    __syncthreads();
  }
  float lo = part[0];
  __syncthreads();
  float M = __uint_as_float(0xff800000u);  // -inf
  for (u32 i = t; i < n; i += VIEW_REDUCE) M = fmaxf(M, v[i] - lo);
  part[t] = M;
  __syncthreads();
  for (u32 s = VIEW_REDUCE / 2; s > 0; s /= 2) {
    if (t < s) part[t] = fmaxf(part[t], part[t + s]);
    __syncthreads();
  }
  if (t == 0) {
    mm[0] = lo;
    mm[1] = part[0];
  }
}

// The normalised threshold, clip(2·(v − min)/(max + 1e-9) − 1, 0, 1) > thr, summed
// along each row into the integral image ii ([h + 1, w + 1]; row 0 and column 0
// zero). One thread per row.
extern "C" __global__ void view_vote_rows(u32 items, const float* blended, const float* mm,
                                          u32* ii, u32 w, float thr) {
  float lo = mm[0], span = mm[1] + 1e-9f;
  for (u64 y = ls_global_id(); y < items; y += ls_global_stride()) {
    u32* row = ii + (y + 1) * (w + 1);
    row[0] = 0u;
    u32 s = 0u;
    for (u32 x = 0; x < w; ++x) {
      float nv = ((blended[y * w + x] - lo) / span) * 2.0f - 1.0f;
      float c = nv != nv ? nv : fminf(fmaxf(nv, 0.0f), 1.0f);
      s += c > thr ? 1u : 0u;
      row[x + 1] = s;
    }
    if (y == 0)
      for (u32 x = 0; x <= w; ++x) ii[x] = 0u;
  }
}

// The integral image's column sums (one thread per column of ii).
extern "C" __global__ void view_vote_cols(u32 items, u32* ii, u32 w, u32 h) {
  for (u64 x = ls_global_id(); x < items; x += ls_global_stride())
    for (u32 y = 1; y <= h; ++y) ii[(u64)y * (w + 1) + x] += ii[(u64)(y - 1) * (w + 1) + x];
}

// LangSplat's majority vote (rows max(0, y − r) .. min(y + r + 1, h − 1), columns
// likewise, ends exclusive; 0 on a tie or an empty window) and the segmentation
// picture: inside, the colour tinted orange; outside, the colour at 35 %.
extern "C" __global__ void view_vote(u32 items, const u32* ii, const u32* px, u32* out, u32 w,
                                     u32 h, u32 r) {
  const float tint[3] = {255.0f, 120.0f, 20.0f};
  for (u64 p = ls_global_id(); p < items; p += ls_global_stride()) {
    u32 y = (u32)(p / w), x = (u32)(p % w);
    u32 y0 = y > r ? y - r : 0u, x0 = x > r ? x - r : 0u;
    u32 y1 = y + r + 1 < h - 1 ? y + r + 1 : h - 1;
    u32 x1 = x + r + 1 < w - 1 ? x + r + 1 : w - 1;
    bool inside = false;
    if (y1 > y0 && x1 > x0) {
      u32 ones = ii[(u64)y1 * (w + 1) + x1] + ii[(u64)y0 * (w + 1) + x0] -
                 ii[(u64)y0 * (w + 1) + x1] - ii[(u64)y1 * (w + 1) + x0];
      u32 area = (y1 - y0) * (x1 - x0);
      inside = ones > area - ones;
    }
    u32 c = px[p], o = 0u;
    for (u32 k = 0; k < 3; ++k) {
      float v = (float)((c >> (8u * k)) & 255u);
      u32 b = inside ? view_round_u8(0.45f * v + 0.55f * tint[k]) : view_round_u8(0.35f * v);
      o |= b << (8u * k);
    }
    out[p] = o;
  }
}
