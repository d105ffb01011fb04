// project.cu — EWA projection of frozen 3D Gaussians (one thread per Gaussian).
//
// Follows lsplat-cpu's project.rs step by step, in f32 where the CPU evaluates in f64:
// splats agree within f32 rounding (more loosely for ill-conditioned conics), so parity
// tests compare them with tolerances; only losses, normalise and Adam match bitwise.
#include "compat.h"

// The camera as the kernel sees it (layout of `KernelCamera` in lsplat-gpu's geometry.rs).
struct LsCamera {
  float view[12];  // row-major [R | t]
  float fx, fy, cx, cy;
  u32 width, height;
  float near_plane, far_plane;
};

__device__ __forceinline__ u32 ls_clamp_tile(float v, u32 hi) {
  const u32 t = (u32)fmaxf(v, 0.0f);  // saturating conversion, as Rust's `as u32`
  return t < hi ? t : hi;
}

// splats: 8 floats per Gaussian [x, y, conic a, b, c, opacity, depth, 0];
// rects: [x0, y0, x1, y1) tiles, all zero when culled or off-screen.
extern "C" __global__ void ls_project(const float* means, const float* cov3d, const float* opacity,
                                      u32 n, LsCamera cam, float* splats, u32* rects) {
  const u32 tiles_x = (cam.width + LS_TILE_SIZE - 1) / LS_TILE_SIZE;
  const u32 tiles_y = (cam.height + LS_TILE_SIZE - 1) / LS_TILE_SIZE;
  for (u64 g = ls_global_id(); g < n; g += ls_global_stride()) {
    const float op = opacity[g];
    float* out = splats + 8 * g;
    u32* rect = rects + 4 * g;
    for (int k = 0; k < 8; k++) out[k] = 0.0f;
    out[5] = op;
    for (int k = 0; k < 4; k++) rect[k] = 0u;
    const float* v = cam.view;
    const float m0 = means[3 * g], m1 = means[3 * g + 1], m2 = means[3 * g + 2];
    float pc[3];
    for (int i = 0; i < 3; i++) pc[i] = v[4 * i] * m0 + v[4 * i + 1] * m1 + v[4 * i + 2] * m2 + v[4 * i + 3];
    const float z = pc[2];
    if (!(z >= cam.near_plane && z <= cam.far_plane) || op < LS_ALPHA_THRESHOLD) continue;
    const float* cv = cov3d + 6 * g;
    const float s[3][3] = {{cv[0], cv[1], cv[2]}, {cv[1], cv[3], cv[4]}, {cv[2], cv[4], cv[5]}};
    float rs[3][3], sc[3][3];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        rs[i][j] = v[4 * i] * s[0][j] + v[4 * i + 1] * s[1][j] + v[4 * i + 2] * s[2][j];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        sc[i][j] = rs[i][0] * v[4 * j] + rs[i][1] * v[4 * j + 1] + rs[i][2] * v[4 * j + 2];
    const float w = (float)cam.width, h = (float)cam.height;
    const float guard = LS_FOV_GUARD - 1.0f;
    const float lim_xp = (w - cam.cx) / cam.fx + guard * 0.5f * w / cam.fx;
    const float lim_xn = cam.cx / cam.fx + guard * 0.5f * w / cam.fx;
    const float lim_yp = (h - cam.cy) / cam.fy + guard * 0.5f * h / cam.fy;
    const float lim_yn = cam.cy / cam.fy + guard * 0.5f * h / cam.fy;
    float ux = pc[0] / z, uy = pc[1] / z;
    ux = ux < -lim_xn ? -lim_xn : (ux > lim_xp ? lim_xp : ux);
    uy = uy < -lim_yn ? -lim_yn : (uy > lim_yp ? lim_yp : uy);
    const float tx = z * ux, ty = z * uy;
    const float jm[2][3] = {{cam.fx / z, 0.0f, -cam.fx * tx / (z * z)},
                            {0.0f, cam.fy / z, -cam.fy * ty / (z * z)}};
    float jt[2][3];
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 3; k++)
        jt[i][k] = jm[i][0] * sc[0][k] + jm[i][1] * sc[1][k] + jm[i][2] * sc[2][k];
    float c2[2][2];
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 2; k++)
        c2[i][k] = jt[i][0] * jm[k][0] + jt[i][1] * jm[k][1] + jt[i][2] * jm[k][2];
    const float a = c2[0][0] + LS_EPS2D;
    const float b = c2[0][1];
    const float c = c2[1][1] + LS_EPS2D;
    const float det = a * c - b * b;
    if (det <= 0.0f || !isfinite(det)) continue;
    const float inv = 1.0f / det;
    const float extent = fminf(sqrtf(2.0f * logf(op / LS_ALPHA_THRESHOLD)), LS_EXTENT_SIGMA);
    const float rx = ceilf(extent * sqrtf(a)), ry = ceilf(extent * sqrtf(c));
    const float x = cam.fx * pc[0] / z + cam.cx, y = cam.fy * pc[1] / z + cam.cy;
    out[0] = x;
    out[1] = y;
    out[2] = c * inv;
    out[3] = -b * inv;
    out[4] = a * inv;
    out[6] = z;
    const float ts = (float)LS_TILE_SIZE;
    const u32 x0 = ls_clamp_tile(floorf((x - rx) / ts), tiles_x);
    const u32 y0 = ls_clamp_tile(floorf((y - ry) / ts), tiles_y);
    const u32 x1 = ls_clamp_tile(ceilf((x + rx) / ts), tiles_x);
    const u32 y1 = ls_clamp_tile(ceilf((y + ry) / ts), tiles_y);
    if (x0 < x1 && y0 < y1) {
      rect[0] = x0;
      rect[1] = y0;
      rect[2] = x1;
      rect[3] = y1;
    }
  }
}
