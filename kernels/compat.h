// compat.h — the CUDA/HIP differences every lsplat kernel relies on.
//
// Kernels are compiled at run time (NVRTC, hiprtc, or the simt runtime's C++ compiler)
// with the constants of `lsplat_core::constants` passed as -D defines
// (LS_ALPHA_THRESHOLD, LS_MAX_ALPHA, LS_TRANSMITTANCE_STOP, LS_EPS2D, LS_EXTENT_SIGMA,
// LS_FOV_GUARD, LS_NORM_EPS) plus LS_TILE_SIZE and LS_CHANNELS, and the device's warp
// size as LS_WARP_SIZE (the runtime reads it from the device: 32 on NVIDIA, 64 on CDNA,
// 32 on RDNA). Nothing here hard-codes them.
#pragma once

#if !defined(LS_ALPHA_THRESHOLD) || !defined(LS_MAX_ALPHA) || \
    !defined(LS_TRANSMITTANCE_STOP) || !defined(LS_TILE_SIZE) || !defined(LS_CHANNELS)
#error "lsplat kernels need the -D defines of lsplat_kernels::defines()"
#endif
#if !defined(LS_WARP_SIZE)
#error "lsplat kernels need -DLS_WARP_SIZE=<the device's warp size>"
#endif

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

#if defined(__HIPCC__) || defined(__HIPCC_RTC__)
// ---- HIP (wave64 on CDNA, wave32 on RDNA) -------------------------------
#if LS_WARP_SIZE != 32 && LS_WARP_SIZE != 64
#error "HIP wavefronts have 32 or 64 lanes"
#endif
typedef unsigned long long ls_lane_mask;
#define LS_BALLOT(pred) ((ls_lane_mask)__ballot(pred))
#define LS_POPC(mask) __popcll(mask)
#define LS_SHFL_DOWN(v, d) __shfl_down((v), (d))
#define LS_SHFL_UP(v, d) __shfl_up((v), (d))
#define LS_SHFL(v, src) __shfl((v), (src))
#else
// ---- CUDA ---------------------------------------------------------------
#if LS_WARP_SIZE != 32
#error "CUDA warps have 32 lanes"
#endif
typedef unsigned int ls_lane_mask;
#define LS_BALLOT(pred) __ballot_sync(0xffffffffu, (pred))
#define LS_POPC(mask) __popc(mask)
#define LS_SHFL_DOWN(v, d) __shfl_down_sync(0xffffffffu, (v), (d))
#define LS_SHFL_UP(v, d) __shfl_up_sync(0xffffffffu, (v), (d))
#define LS_SHFL(v, src) __shfl_sync(0xffffffffu, (v), (src))
#endif

// Lane index and the mask of the lanes below it.
__device__ __forceinline__ u32 ls_lane() { return threadIdx.x % LS_WARP_SIZE; }
__device__ __forceinline__ ls_lane_mask ls_lanemask_lt() {
  return (((ls_lane_mask)1) << ls_lane()) - 1;
}

// Float atomics: hardware fp32 add on both vendors (HIP: unsafe = no CAS loop;
// the buffers are ordinary device memory).
__device__ __forceinline__ void ls_atomic_add(float* p, float v) {
#if defined(__HIPCC__) || defined(__HIPCC_RTC__)
  unsafeAtomicAdd(p, v);
#else
  atomicAdd(p, v);
#endif
}

// Sum over a warp (result valid in lane 0).
__device__ __forceinline__ double ls_warp_sum(double v) {
  for (int d = LS_WARP_SIZE / 2; d > 0; d /= 2) v += LS_SHFL_DOWN(v, d);
  return v;
}

// Grid-stride index helpers (64-bit safe).
__device__ __forceinline__ u64 ls_global_id() {
  return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ u64 ls_global_stride() { return (u64)gridDim.x * blockDim.x; }

// ---- Half-precision weights, bit-exact with the `half` crate (RNE) -------
__device__ __forceinline__ u16 ls_f32_to_bf16(float f) {
  u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);  // quiet NaN
  return (u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float ls_bf16_to_f32(u16 h) { return __uint_as_float(((u32)h) << 16); }

__device__ __forceinline__ u16 ls_f32_to_f16(float f) {
  u32 x = __float_as_uint(f);
  u32 sign = (x >> 16) & 0x8000u;
  u32 ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (u16)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return (u16)(sign | 0x7c00u);  // rounds to infinity
  if (ax < 0x33000000u) return (u16)sign;               // below 2^-25: zero
  u32 e = ax >> 23;
  if (e < 113u) {  // half subnormal
    u32 mant = (ax & 0x7fffffu) | 0x800000u;
    u32 shift = 126u - e;
    u32 h = mant >> shift;
    u32 rem = mant & ((1u << shift) - 1u);
    u32 half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (u16)(sign | h);
  }
  u32 h = ((e - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  u32 rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (u16)(sign | h);
}
__device__ __forceinline__ float ls_f16_to_f32(u16 h) {
  u32 sign = ((u32)h & 0x8000u) << 16;
  u32 e = ((u32)h >> 10) & 0x1fu;
  u32 m = (u32)h & 0x3ffu;
  if (e == 0u) {
    float f = (float)m * 5.9604644775390625e-8f;  // m · 2^-24, exact
    return sign ? -f : f;
  }
  if (e == 31u) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
