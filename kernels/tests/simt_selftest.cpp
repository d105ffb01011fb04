// Self-test of kernels/simt.h without the Rust host: runs a kernel that uses block
// barriers, barrier reductions, shuffles, ballots and shared memory under every schedule
// and checks the results against values computed here, and that __shared__ memory is
// poisoned before every block. Built for another architecture
// (e.g. aarch64 with a cross compiler, run under qemu-user) it checks the fiber context
// switch of that architecture. Exit status 0 = pass; messages on stderr.
//
//   g++ -std=c++20 -O2 -DLS_WARP_SIZE=32 -include kernels/simt.h kernels/tests/simt_selftest.cpp
#include <cstdio>
#include <cstdlib>

// Block-wide inclusive scan through shared memory + warp reductions.
extern "C" __global__ void selftest(const unsigned* in, unsigned* scan, unsigned* warp_sum,
                                    unsigned long long* ballot, unsigned* count) {
  __shared__ unsigned buf[1024];
  const unsigned t = threadIdx.x;
  const unsigned base = blockIdx.x * blockDim.x;
  const unsigned v = in[base + t];
  buf[t] = v;
  __syncthreads();
  for (unsigned d = 1; d < blockDim.x; d <<= 1) {
    const unsigned add = t >= d ? buf[t - d] : 0u;
    __syncthreads();
    buf[t] += add;
    __syncthreads();
  }
  scan[base + t] = buf[t];
  unsigned s = v;
  for (int d = LS_WARP_SIZE / 2; d > 0; d >>= 1) s += __shfl_down_sync(0xffffffffu, s, d);
  if (t % LS_WARP_SIZE == 0) warp_sum[(base + t) / LS_WARP_SIZE] = s;
#if LS_WARP_SIZE == 64
  const unsigned long long b = __ballot(v & 1u);
#else
  const unsigned long long b = __ballot_sync(0xffffffffu, v & 1u);
#endif
  if (t % LS_WARP_SIZE == 0) ballot[(base + t) / LS_WARP_SIZE] = b;
  const int c = __syncthreads_count(v % 3u == 0u);
  if (t == 0) count[blockIdx.x] = (unsigned)c;
}

// Reads back shared memory of which only the first `written` entries were written.
extern "C" __global__ void shared_readback(unsigned written, unsigned* out) {
  __shared__ unsigned s[256];
  if (threadIdx.x < written) s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

extern "C" int ls_simt_run_selftest(const ls_simt::Launch* l, void** p) {
  return ls_simt::run_block(l, p, &ls_simt::invoke<selftest>, "selftest", 0);
}
extern "C" int ls_simt_run_shared_readback(const ls_simt::Launch* l, void** p) {
  return ls_simt::run_block(l, p, &ls_simt::invoke<shared_readback>, "shared_readback", 0);
}

// All of shared memory written, then half: the unwritten half reads back as poison, not
// as the previous block's values.
static int check_poison() {
  const unsigned threads = 256;
  unsigned out[threads];
  unsigned* pout = out;
  char err[1024] = {0};
  volatile unsigned current = 0;
  for (unsigned written : {threads, threads / 2}) {
    void* params[] = {&written, &pout};
    ls_simt::Launch l{{1, 1, 1}, {threads, 1, 1}, 0, 0, 1, err, sizeof err, &current};
    if (ls_simt_run_shared_readback(&l, params) != 0) {
      fprintf(stderr, "shared_readback failed: %s\n", err);
      return 1;
    }
    for (unsigned t = 0; t < threads; t++) {
      const unsigned want = t < written ? t : 0xffffffffu;
      if (out[t] != want) {
        fprintf(stderr, "shared_readback(%u): s[%u] = %x, want %x\n", written, t, out[t], want);
        return 1;
      }
    }
  }
  return 0;
}

int main() {
  const unsigned blocks = 3, threads = 256, n = blocks * threads, warps = n / LS_WARP_SIZE;
  int failures = 0;
  for (int schedule = 0; schedule < 3; schedule++) {
    unsigned in[n], scan[n], wsum[warps], count[blocks];
    unsigned long long ballot[warps];
    for (unsigned i = 0; i < n; i++) in[i] = (i * 2654435761u) >> 20;
    const unsigned* pin = in;
    unsigned *pscan = scan, *pw = wsum, *pc = count;
    unsigned long long* pb = ballot;
    void* params[] = {&pin, &pscan, &pw, &pb, &pc};
    char err[1024] = {0};
    volatile unsigned current = 0;
    for (unsigned b = 0; b < blocks; b++) {
      ls_simt::Launch l{{blocks, 1, 1}, {threads, 1, 1}, b, schedule, 0x9e3779b9u + b,
                        err, sizeof err, &current};
      if (ls_simt_run_selftest(&l, params) != 0) {
        fprintf(stderr, "schedule %d: launch failed: %s\n", schedule, err);
        return 1;
      }
    }
    for (unsigned b = 0; b < blocks; b++) {
      unsigned acc = 0, c = 0;
      for (unsigned t = 0; t < threads; t++) {
        const unsigned i = b * threads + t;
        acc += in[i];
        c += in[i] % 3u == 0u;
        if (scan[i] != acc) {
          fprintf(stderr, "schedule %d: scan[%u] = %u, want %u\n", schedule, i, scan[i], acc);
          failures++;
          break;
        }
      }
      if (count[b] != c) {
        fprintf(stderr, "schedule %d: count[%u] = %u, want %u\n", schedule, b, count[b], c);
        failures++;
      }
    }
    for (unsigned w = 0; w < warps; w++) {
      unsigned s = 0;
      unsigned long long bits = 0;
      for (unsigned k = 0; k < LS_WARP_SIZE; k++) {
        s += in[w * LS_WARP_SIZE + k];
        if (in[w * LS_WARP_SIZE + k] & 1u) bits |= 1ull << k;
      }
      if (wsum[w] != s || ballot[w] != bits) {
        fprintf(stderr, "schedule %d: warp %u sum %u/%u ballot %llx/%llx\n", schedule, w,
                wsum[w], s, ballot[w], bits);
        failures++;
      }
    }
  }
  failures += check_poison();
  if (failures) return 1;
  fprintf(stderr, "simt self-test passed (warp %d)\n", LS_WARP_SIZE);
  return 0;
}
