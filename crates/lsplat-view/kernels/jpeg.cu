// jpeg.cu — a frame's baseline JPEG on the device (lsplat_view::jpeg, step for
// step): every 8x8 block's quantised coefficients, then every restart interval's
// Huffman code in its own slot, then the intervals joined with RST markers. All
// integer arithmetic, so the bytes are the host encoder's.
//
// `tables` (lsplat_view::jpeg::tables): the DCT matrix at 2^JPEG_DCT_BITS, the luma
// and chroma quantisation tables (natural order) at JPEG_QUANT_AT, the zigzag order
// at JPEG_ZIGZAG_AT, and `code | length << 16` of the DC luma/chroma symbols at
// JPEG_DC_AT (16 each) and of the AC luma/chroma symbols at JPEG_AC_AT (256 each).
// A pixel's colour is one u32, r | g << 8 | b << 16; coefficients are i32 bits.
#include "compat.h"

// JFIF's Y, Cb or Cr (k = 0, 1, 2) in 16-bit fixed point.
__device__ inline int jpeg_component(u32 c, u32 k) {
  int r = (int)(c & 255u), g = (int)((c >> 8) & 255u), b = (int)((c >> 16) & 255u);
  if (k == 0u) return (19595 * r + 38470 * g + 7471 * b + 32768) >> 16;
  if (k == 1u) return (-11059 * r - 21709 * g + 32768 * b + (128 << 16) + 32767) >> 16;
  return (32768 * r - 27439 * g - 5329 * b + (128 << 16) + 32767) >> 16;
}

// One block per item: MCU-major, the MCU's sub*sub luma blocks then Cb then Cr.
extern "C" __global__ void jpeg_blocks(u32 items, const u32* px, const u32* tables, u32* coefs,
                                       u32 w, u32 h, u32 sub, u32 mcu_x) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    u32 bpm = sub * sub + 2u;
    u32 mcu = (u32)(i / bpm), b = (u32)(i % bpm);
    u32 mx = mcu % mcu_x, my = mcu / mcu_x;
    bool luma = b < sub * sub;
    int f[64];
    for (u32 p = 0; p < 64u; ++p) {
      u32 r = p / 8u, c = p % 8u;
      int v;
      if (luma) {
        u32 x = mx * 8u * sub + (b % sub) * 8u + c, y = my * 8u * sub + (b / sub) * 8u + r;
        x = x < w - 1u ? x : w - 1u;
        y = y < h - 1u ? y : h - 1u;
        v = jpeg_component(px[(u64)y * w + x], 0u);
      } else {
        u32 k = b - sub * sub + 1u;
        u32 x0 = (mx * 8u + c) * sub, y0 = (my * 8u + r) * sub;
        int sum = 0;
        for (u32 dy = 0; dy < sub; ++dy) {
          for (u32 dx = 0; dx < sub; ++dx) {
            u32 x = x0 + dx, y = y0 + dy;
            x = x < w - 1u ? x : w - 1u;
            y = y < h - 1u ? y : h - 1u;
            sum += jpeg_component(px[(u64)y * w + x], k);
          }
        }
        v = sub == 2u ? (sum + 2) >> 2 : sum;
      }
      f[p] = v - 128;
    }
    int rows[64];
    for (u32 r = 0; r < 8u; ++r) {
      for (u32 u = 0; u < 8u; ++u) {
        int acc = 0;
        for (u32 x = 0; x < 8u; ++x) acc += f[r * 8u + x] * (int)tables[u * 8u + x];
        rows[r * 8u + u] = (acc + (1 << (JPEG_DCT_BITS - JPEG_PASS_BITS - 1u))) >>
                           (JPEG_DCT_BITS - JPEG_PASS_BITS);
      }
    }
    const u32* q = tables + JPEG_QUANT_AT + (luma ? 0u : 64u);
    u32* out = coefs + i * 64u;
    for (u32 k = 0; k < 64u; ++k) {
      u32 z = tables[JPEG_ZIGZAG_AT + k];
      u32 v = z / 8u, u = z % 8u;
      int acc = 0;
      for (u32 y = 0; y < 8u; ++y) acc += rows[y * 8u + u] * (int)tables[v * 8u + y];
      int d = (int)q[z] << (JPEG_DCT_BITS + JPEG_PASS_BITS);
      int a = acc < 0 ? -acc : acc;
      int mag = (a + (d >> 1)) / d;
      if (k > 0u && mag > (int)JPEG_AC_MAX) mag = (int)JPEG_AC_MAX;
      out[k] = (u32)(acc < 0 ? -mag : mag);
    }
  }
}

// A bit writer into one interval's slot (bytes little-endian in its words), with
// JPEG's byte stuffing.
struct JpegBits {
  u32* slot;
  u32 len;   // bytes written
  u32 word;  // the word being filled
  u32 acc;   // pending bits (the low n)
  u32 n;
};

__device__ inline void jpeg_byte(JpegBits& s, u32 byte) {
  s.word |= byte << (8u * (s.len % 4u));
  s.len += 1u;
  if (s.len % 4u == 0u) {
    s.slot[s.len / 4u - 1u] = s.word;
    s.word = 0u;
  }
}

__device__ inline void jpeg_put(JpegBits& s, u32 code, u32 len) {
  s.acc = (s.acc << len) | (code & ((1u << len) - 1u));
  s.n += len;
  while (s.n >= 8u) {
    s.n -= 8u;
    u32 byte = (s.acc >> s.n) & 255u;
    jpeg_byte(s, byte);
    if (byte == 255u) jpeg_byte(s, 0u);
  }
}

__device__ inline void jpeg_code(JpegBits& s, u32 c) { jpeg_put(s, c & 0xffffu, c >> 16); }

__device__ inline u32 jpeg_category(int v) {
  u32 m = (u32)(v < 0 ? -v : v), c = 0u;
  while (m != 0u) {
    c += 1u;
    m >>= 1;
  }
  return c;
}

// One restart interval per item: its MCUs' code into slot `i` (slot_words words),
// its length in bytes into lens[i].
extern "C" __global__ void jpeg_huffman(u32 items, const u32* coefs, const u32* tables,
                                        u32* slots, u32* lens, u32 sub, u32 mcus, u32 restart,
                                        u32 slot_words) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    u32 bpm = sub * sub + 2u;
    u32 first = (u32)i * restart;
    u32 last = first + restart < mcus ? first + restart : mcus;
    JpegBits s;
    s.slot = slots + i * slot_words;
    s.len = 0u;
    s.word = 0u;
    s.acc = 0u;
    s.n = 0u;
    int pred[3] = {0, 0, 0};
    for (u32 mcu = first; mcu < last; ++mcu) {
      for (u32 b = 0; b < bpm; ++b) {
        u32 comp = b + 1u > sub * sub ? b + 1u - sub * sub : 0u;
        u32 t = comp > 0u ? 1u : 0u;
        const u32* c = coefs + ((u64)mcu * bpm + b) * 64u;
        int dc = (int)c[0];
        int diff = dc - pred[comp];
        pred[comp] = dc;
        u32 cat = jpeg_category(diff);
        jpeg_code(s, tables[JPEG_DC_AT + 16u * t + cat]);
        if (cat > 0u) jpeg_put(s, (u32)(diff < 0 ? diff - 1 : diff), cat);
        const u32* ac = tables + JPEG_AC_AT + 256u * t;
        u32 run = 0u;
        for (u32 k = 1; k < 64u; ++k) {
          int v = (int)c[k];
          if (v == 0) {
            run += 1u;
            continue;
          }
          while (run > 15u) {
            jpeg_code(s, ac[0xf0]);
            run -= 16u;
          }
          u32 vc = jpeg_category(v);
          jpeg_code(s, ac[(run << 4) | vc]);
          jpeg_put(s, (u32)(v < 0 ? v - 1 : v), vc);
          run = 0u;
        }
        if (run > 0u) jpeg_code(s, ac[0]);
      }
    }
    if (s.n > 0u) jpeg_put(s, 0x7fu, 8u - s.n);
    if (s.len % 4u != 0u) s.slot[s.len / 4u] = s.word;
    lens[i] = s.len;
  }
}

// Byte p of the joined intervals: an interval's byte, or the RST marker after it.
__device__ inline u32 jpeg_joined(const u32* slots, const u32* lens, const u32* offsets,
                                  u32 segments, u32 slot_words, u32 p) {
  // The last interval starting at or before p.
  u32 lo = 0u, hi = segments;
  while (hi - lo > 1u) {
    u32 mid = (lo + hi) / 2u;
    if (offsets[mid] <= p) lo = mid;
    else hi = mid;
  }
  u32 local = p - offsets[lo];
  if (local < lens[lo]) return (slots[(u64)lo * slot_words + local / 4u] >> (8u * (local % 4u))) & 255u;
  if (local == lens[lo]) return 255u;
  return 0xd0u + lo % 8u;
}

// One output word per item: bytes 4i..4i+3 of the `total` joined bytes.
extern "C" __global__ void jpeg_pack(u32 items, const u32* slots, const u32* lens,
                                     const u32* offsets, u32* out, u32 segments, u32 slot_words,
                                     u32 total) {
  for (u64 i = ls_global_id(); i < items; i += ls_global_stride()) {
    u32 word = 0u;
    for (u32 b = 0; b < 4u; ++b) {
      u32 p = (u32)i * 4u + b;
      if (p < total) word |= jpeg_joined(slots, lens, offsets, segments, slot_words, p) << (8u * b);
    }
    out[i] = word;
  }
}
