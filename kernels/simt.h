// simt.h — runs the CUDA kernels of kernels/ on the CPU (the `simt` runtime of lsplat-gpu).
//
// The runtime compiles each kernel family with the system C++ compiler (C++20), this
// header force-included, the same -D defines as NVRTC/hiprtc plus LS_WARP_SIZE, and a
// generated trampoline per kernel. A block runs on one OS thread; each of its threads
// is a fiber with its own stack (guard page below it). Fibers run until they reach a
// synchronisation point (a block barrier or a warp collective) and then hand over
// directly to the next fiber of the round (one context switch per fiber); after the
// last, the block scheduler resolves the synchronisation points and starts the next
// round in the order the schedule asks for (in order, reverse, or a seeded random
// permutation per round). So barriers, barrier
// reductions, shuffles and ballots are exact, and a missing barrier shows up as a
// schedule-dependent result. Atomics are real atomics (blocks run concurrently).
//
// Diagnostics instead of hangs: a barrier met at different source lines, a thread that
// exits while others wait at a barrier, a warp collective that some lane of the warp
// never reaches, and a deadlock all stop the launch with a message naming the kernel,
// block, thread and line.
//
// With LS_WARP_SIZE 64 the header declares __HIPCC_RTC__, so compat.h takes its HIP
// branch (wave64 ballots and shuffles), as hiprtc would on a CDNA GPU.
#pragma once

#if !defined(LS_WARP_SIZE)
#error "simt builds need -DLS_WARP_SIZE=32 or 64"
#endif
#if LS_WARP_SIZE == 64
#define __HIPCC_RTC__ 1
#elif LS_WARP_SIZE != 32
#error "simt supports warps of 32 or 64 lanes"
#endif

#if defined(LS_SIMT_SCAN)
// Scan pass: only preprocessed, never compiled. The runtime finds every kernel (and its
// launch bound) by these markers after macro expansion.
#define __global__ LS_SIMT_GLOBAL
#define __launch_bounds__(n) LS_SIMT_BOUNDS(n)
#define __device__
#define __forceinline__
#define __shared__
#else

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(n)
// One instance per OS thread (a block runs entirely on one OS thread), all of them in
// the section ls_simt_shared, which run_block poisons before every block.
#define __shared__ __attribute__((section("ls_simt_shared"))) static thread_local

struct uint3 {
  unsigned x, y, z;
};
typedef uint3 dim3;

namespace ls_simt {

enum State : int { kRunnable = 0, kBarrier = 1, kWarp = 2, kDone = 3 };
enum WarpOp : int { kBallot = 1, kShflDown = 2, kShflUp = 3, kShflIdx = 4 };

struct Fiber {
  void* sp;
  uint3 tid;
  unsigned linear;
  int state;
  int line;    // source line of the sync point it waits at
  int op;      // WarpOp, or the barrier kind
  int pred;    // barrier / ballot predicate
  int delta;   // shuffle distance / source lane
  uint64_t value;   // shuffle operand bits
  uint64_t result;  // collective result bits
};

// The launch as the Rust host describes it (layout of `SimtLaunch` in lsplat-gpu).
struct Launch {
  unsigned grid[3];
  unsigned block[3];
  unsigned block_index;  // linear index of the block to run
  int schedule;          // 0 in order, 1 reverse, 2 random
  uint64_t seed;         // random schedule seed (already mixed with launch and block)
  char* error;           // message buffer
  unsigned error_len;
  volatile unsigned* current_thread;  // written on every switch (fault reports)
};

struct Fiber;
struct BlockCtx {
  uint3 bid, bdim, gdim;
  void** params;
  void (*body)(void**);
  void* sched_sp;
  // The round in progress: fibers run in `order`, each handing over to the next.
  const unsigned* order;
  unsigned pos, count;
  Fiber* fibers;
  volatile unsigned* current_thread;
};

inline thread_local Fiber* cur = nullptr;
inline thread_local BlockCtx* blk = nullptr;

// ---- memory faults --------------------------------------------------------------------
// A device buffer ends against a PROT_NONE page and every fiber stack has a guard page,
// so an overrun faults at once. The handler names the kernel, block and thread that
// faulted, then hands the signal on (to the previously installed handler, or the
// default action), so the process still stops: a corrupted launch cannot continue.
inline thread_local const char* fault_kernel = nullptr;  // set while a block runs
inline thread_local unsigned fault_block = 0;
inline struct sigaction previous_segv, previous_bus;

inline void on_fault(int sig, siginfo_t* info, void* uctx) {
  if (fault_kernel) {
    char msg[640];
    const int len = snprintf(
        msg, sizeof msg,
        "simt: %s in kernel %s, block %u, thread %u, address %p: an access past the end of "
        "a device buffer (each ends against a PROT_NONE page) or a fiber stack overflow\n",
        sig == SIGBUS ? "bus error" : "memory fault", fault_kernel, fault_block,
        cur ? cur->linear : 0u, info->si_addr);
    if (len > 0) (void)!write(2, msg, (size_t)std::min(len, (int)sizeof msg - 1));
    fault_kernel = nullptr;
  }
  struct sigaction* prev = sig == SIGBUS ? &previous_bus : &previous_segv;
  if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
    prev->sa_sigaction(sig, info, uctx);
    return;
  }
  if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL &&
      prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
    return;
  }
  // Returning re-runs the faulting access under the default action.
  signal(sig, SIG_DFL);
}

// Installs the handler once per loaded kernel library (each library chains to the one
// installed before it; the runtime never unloads them).
inline void install_fault_handler() {
  static const bool installed = [] {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);
    return true;
  }();
  (void)installed;
}

// Marks this OS thread as running `kernel`'s block for the fault handler.
struct FaultScope {
  FaultScope(const char* kernel, unsigned block) {
    fault_kernel = kernel;
    fault_block = block;
  }
  ~FaultScope() { fault_kernel = nullptr; }
};

extern "C" void ls_simt_switch(void** save_sp, void* next_sp);

#if defined(__x86_64__)
asm(R"(
  .text
  .p2align 4
  .hidden ls_simt_switch
  .globl ls_simt_switch
  .type ls_simt_switch,@function
ls_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ls_simt_switch,.-ls_simt_switch
)");
#elif defined(__aarch64__)
asm(R"(
  .text
  .p2align 4
  .hidden ls_simt_switch
  .globl ls_simt_switch
  .type ls_simt_switch,%function
ls_simt_switch:
  sub sp, sp, #160
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  add sp, sp, #160
  ret
  .size ls_simt_switch,.-ls_simt_switch
)");
#else
#error "the simt runtime supports x86-64 and aarch64"
#endif

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxThreads = 1024;

// Fiber stacks of this OS thread, each with a PROT_NONE guard page below it.
struct Stacks {
  char* base[kMaxThreads] = {};
  ~Stacks() {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (char* b : base)
      if (b) munmap(b, kStackBytes + page);
  }
  char* top(unsigned i) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!base[i]) {
      void* m = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) return nullptr;
      mprotect(m, page, PROT_NONE);
      base[i] = (char*)m;
    }
    return base[i] + page + kStackBytes;
  }
};
inline thread_local Stacks stacks;
inline thread_local Fiber fibers[kMaxThreads];

// Suspends the current fiber and resumes the next one of the round (or, after the last,
// the block scheduler): one context switch per fiber per round.
inline void hand_over() {
  BlockCtx* b = blk;
  Fiber* from = cur;
  if (++b->pos < b->count) {
    Fiber* next = &b->fibers[b->order[b->pos]];
    cur = next;
    *b->current_thread = next->linear;
    ls_simt_switch(&from->sp, next->sp);
  } else {
    ls_simt_switch(&from->sp, b->sched_sp);
  }
}

[[noreturn]] inline void fiber_entry() {
  BlockCtx* b = blk;
  b->body(b->params);
  cur->state = kDone;
  hand_over();
  __builtin_trap();  // a finished fiber is never resumed
}

// Initial frame: ls_simt_switch "returns" into fiber_entry on a fresh stack.
inline void* initial_sp(char* top) {
  uintptr_t t = (uintptr_t)top & ~(uintptr_t)15;
#if defined(__x86_64__)
  void** sp = (void**)t;
  *--sp = nullptr;                   // fake return address of fiber_entry
  *--sp = (void*)&fiber_entry;       // popped by `ret`
  for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp rbx r12-r15
  return sp;
#else
  void** sp = (void**)(t - 160);
  for (int i = 0; i < 20; i++) sp[i] = nullptr;
  sp[11] = (void*)&fiber_entry;  // x30
  return sp;
#endif
}

inline void yield() { hand_over(); }

// ---- synchronisation points ------------------------------------------------------
inline int barrier(int line, int kind, int pred) {
  Fiber* f = cur;
  f->state = kBarrier;
  f->line = line;
  f->op = kind;
  f->pred = pred;
  yield();
  return (int)f->result;
}

template <typename T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "shuffle operands are at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
inline T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

inline uint64_t warp_op(int line, int op, int pred, uint64_t value, int delta) {
  Fiber* f = cur;
  f->state = kWarp;
  f->line = line;
  f->op = op;
  f->pred = pred;
  f->value = value;
  f->delta = delta;
  yield();
  return f->result;
}

// ---- __shared__ poisoning ------------------------------------------------------------
// Every __shared__ variable of this kernel library is a thread-local in the section
// ls_simt_shared, so this OS thread's copies lie in one range of its TLS block for the
// library: the section's offset in the library's TLS template (from the linker's
// __start/__stop symbols and the PT_TLS header) added to this thread's TLS block of the
// library (dl_iterate_phdr's dlpi_tls_data). Filling it with 0xff bytes (a NaN as float
// or double, 0xffffffff as an index) before every block makes a read of shared memory
// that no thread of the block wrote change the result, instead of silently seeing the
// previous block's values.
extern "C" char __start_ls_simt_shared[] __attribute__((visibility("hidden")));
extern "C" char __stop_ls_simt_shared[] __attribute__((visibility("hidden")));
// Keeps the section present (and this thread's TLS block allocated) in every library.
__attribute__((section("ls_simt_shared"))) static thread_local unsigned char shared_anchor;
constexpr unsigned char kSharedPoison = 0xff;

struct SharedRange {
  char* lo = nullptr;
  size_t bytes = 0;
  bool found = false;
};
inline thread_local SharedRange shared_range;

inline int find_shared(dl_phdr_info* info, size_t size, void* out) {
  const uintptr_t code = (uintptr_t)&find_shared;
  bool mine = false;
  const ElfW(Phdr)* tls = nullptr;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && code >= lo && code < lo + ph.p_memsz) mine = true;
    if (ph.p_type == PT_TLS) tls = &ph;
  }
  if (!mine) return 0;
  SharedRange* r = (SharedRange*)out;
  const size_t need = offsetof(dl_phdr_info, dlpi_tls_data) + sizeof(void*);
  if (tls && size >= need && info->dlpi_tls_data) {
    const uintptr_t offset =
        (uintptr_t)__start_ls_simt_shared - (info->dlpi_addr + tls->p_vaddr);
    r->lo = (char*)info->dlpi_tls_data + offset;
    r->bytes = (size_t)(__stop_ls_simt_shared - __start_ls_simt_shared);
  }
  return 1;
}

// Poisons this thread's __shared__ memory; false when it cannot be located.
inline bool poison_shared() {
  SharedRange& r = shared_range;
  if (!r.found) {
    shared_anchor = 0;  // allocates this thread's TLS block of the library
    dl_iterate_phdr(find_shared, &r);
    const char* a = (const char*)&shared_anchor;
    if (!r.lo || a < r.lo || a >= r.lo + r.bytes) return false;
    r.found = true;
  }
  memset(r.lo, kSharedPoison, r.bytes);
  return true;
}

// ---- the block scheduler -----------------------------------------------------------
struct Rng {
  uint64_t s;
  uint64_t next() {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

inline int fail(const Launch* l, const char* kernel, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
inline int fail(const Launch* l, const char* kernel, const char* fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(l->error, l->error_len, "%s, block %u: %s", kernel, l->block_index, msg);
  return 1;
}

inline const char* op_name(const Fiber& f) {
  if (f.state == kBarrier) return "__syncthreads";
  switch (f.op) {
    case kBallot: return "a ballot";
    case kShflDown: return "a shuffle-down";
    case kShflUp: return "a shuffle-up";
    default: return "a shuffle";
  }
}

// Resolves the warp collective of warp `w` if every lane waits at it. Returns 1 when
// resolved, 0 when some lane is still running or elsewhere, -1 on a misuse (message
// written).
inline int resolve_warp(const Launch* l, const char* kernel, unsigned w, unsigned n) {
  const unsigned first = w * LS_WARP_SIZE;
  const unsigned last = std::min(n, first + LS_WARP_SIZE);
  Fiber* lead = nullptr;
  bool waiting = false, other = false;
  unsigned exited = kMaxThreads;
  for (unsigned i = first; i < last; i++) {
    Fiber& f = fibers[i];
    if (f.state == kWarp) {
      waiting = true;
      if (!lead) lead = &f;
    } else if (f.state == kDone) {
      exited = i;
    } else {
      other = true;
    }
  }
  if (!waiting || other) return 0;
  if (exited != kMaxThreads)
    return -fail(l, kernel,
                 "thread %u exited without reaching %s at line %d that the other lanes of "
                 "warp %u wait at",
                 exited, op_name(*lead), lead->line, w);
  for (unsigned i = first; i < last; i++) {
    Fiber& f = fibers[i];
    if (f.line != lead->line || f.op != lead->op)
      return -fail(l, kernel,
                   "warp %u diverged at a warp collective: thread %u is at %s (line %d), "
                   "thread %u at %s (line %d)",
                   w, lead->linear, op_name(*lead), lead->line, f.linear, op_name(f), f.line);
  }
  uint64_t ballot = 0;
  for (unsigned i = first; i < last; i++)
    if (fibers[i].pred) ballot |= 1ull << (i - first);
  for (unsigned i = first; i < last; i++) {
    Fiber& f = fibers[i];
    const int lane = (int)(i - first);
    int src = lane;
    switch (f.op) {
      case kBallot: f.result = ballot; break;
      case kShflDown: src = lane + f.delta; break;
      case kShflUp: src = lane - f.delta; break;
      case kShflIdx: src = f.delta; break;
    }
    if (f.op != kBallot) {
      // Out-of-range sources return the caller's own value (CUDA and HIP agree).
      const bool ok = src >= 0 && src < LS_WARP_SIZE && first + (unsigned)src < last;
      f.result = ok ? fibers[first + src].value : f.value;
    }
  }
  for (unsigned i = first; i < last; i++) fibers[i].state = kRunnable;
  return 1;
}

// Runs one block of `body` (the kernel with its parameter array). Returns 0, or 1 with a
// message in l->error.
inline int run_block(const Launch* l, void** params, void (*body)(void**), const char* kernel,
                     unsigned bound) {
  install_fault_handler();
  const FaultScope scope(kernel, l->block_index);
  const unsigned n = l->block[0] * l->block[1] * l->block[2];
  if (n == 0 || n > kMaxThreads)
    return fail(l, kernel, "block of %u threads (supported: 1..=%u)", n, kMaxThreads);
  if (bound && n > bound)
    return fail(l, kernel, "block of %u threads exceeds the kernel's __launch_bounds__(%u)", n,
                bound);
  if (!poison_shared())
    return fail(l, kernel, "cannot locate this thread's __shared__ memory to poison it");
  const unsigned gx = l->grid[0], gy = l->grid[1];
  BlockCtx ctx;
  ctx.bid = uint3{l->block_index % gx, (l->block_index / gx) % gy, l->block_index / (gx * gy)};
  ctx.bdim = uint3{l->block[0], l->block[1], l->block[2]};
  ctx.gdim = uint3{l->grid[0], l->grid[1], l->grid[2]};
  ctx.params = params;
  ctx.body = body;
  ctx.fibers = fibers;
  ctx.current_thread = l->current_thread;
  blk = &ctx;
  for (unsigned i = 0; i < n; i++) {
    Fiber& f = fibers[i];
    char* top = stacks.top(i);
    if (!top) return fail(l, kernel, "cannot map a fiber stack");
    f = Fiber{};
    f.linear = i;
    f.tid = uint3{i % l->block[0], (i / l->block[0]) % l->block[1], i / (l->block[0] * l->block[1])};
    f.state = kRunnable;
    f.sp = initial_sp(top);
  }
  unsigned order[kMaxThreads];
  Rng rng{l->seed};
  const unsigned warps = (n + LS_WARP_SIZE - 1) / LS_WARP_SIZE;
  for (;;) {
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++)
      if (fibers[i].state == kRunnable) order[m++] = i;
    if (l->schedule == 1) std::reverse(order, order + m);
    if (l->schedule == 2)
      for (unsigned i = m; i > 1; i--) std::swap(order[i - 1], order[rng.next() % i]);
    if (m > 0) {
      ctx.order = order;
      ctx.pos = 0;
      ctx.count = m;
      Fiber* f = &fibers[order[0]];
      cur = f;
      *l->current_thread = f->linear;
      ls_simt_switch(&ctx.sched_sp, f->sp);
    }
    // Every fiber now waits somewhere or is done.
    bool progress = false;
    for (unsigned w = 0; w < warps; w++) {
      const int r = resolve_warp(l, kernel, w, n);
      if (r < 0) return 1;
      progress |= r > 0;
    }
    if (progress) continue;
    unsigned at_barrier = 0, done = 0, in_warp = 0;
    const Fiber* first_barrier = nullptr;
    for (unsigned i = 0; i < n; i++) {
      const Fiber& f = fibers[i];
      if (f.state == kBarrier) {
        at_barrier++;
        if (!first_barrier) first_barrier = &f;
      } else if (f.state == kDone) {
        done++;
      } else {
        in_warp++;
      }
    }
    if (done == n) break;
    if (at_barrier == n) {
      int count = 0;
      for (unsigned i = 0; i < n; i++) {
        const Fiber& f = fibers[i];
        if (f.line != first_barrier->line || f.op != first_barrier->op)
          return fail(l, kernel,
                      "threads %u and %u wait at different barriers (lines %d and %d)",
                      first_barrier->linear, f.linear, first_barrier->line, f.line);
        count += f.pred != 0;
      }
      const int kind = first_barrier->op;
      const uint64_t r = kind == 1 ? (uint64_t)(count == (int)n)
                         : kind == 2 ? (uint64_t)(count > 0)
                         : kind == 3 ? (uint64_t)count
                                     : 0;
      for (unsigned i = 0; i < n; i++) {
        fibers[i].result = r;
        fibers[i].state = kRunnable;
      }
      continue;
    }
    if (at_barrier > 0 && in_warp == 0) {
      unsigned gone = 0;
      while (fibers[gone].state != kDone) gone++;
      return fail(l, kernel,
                  "thread %u exited while %u threads wait at __syncthreads (line %d)", gone,
                  at_barrier, first_barrier->line);
    }
    // Some warp waits at a collective that a lane cannot reach (it waits at a barrier).
    for (unsigned i = 0; i < n; i++) {
      const Fiber& f = fibers[i];
      if (f.state == kWarp) {
        const unsigned w = i / LS_WARP_SIZE;
        unsigned j = w * LS_WARP_SIZE;
        while (j < n && fibers[j].state == kWarp) j++;
        return fail(l, kernel,
                    "deadlock: thread %u waits at %s (line %d) but thread %u of its warp "
                    "waits at __syncthreads (line %d)",
                    f.linear, op_name(f), f.line, j, j < n ? fibers[j].line : -1);
      }
    }
    return fail(l, kernel, "deadlock");
  }
  return 0;
}

// Calls kernel `K` with arguments read from a CUDA-style parameter array (one
// pointer per parameter; each fiber copies the values, as every GPU thread gets its
// own parameters).
template <typename... A>
constexpr size_t arity(void (*)(A...)) {
  return sizeof...(A);
}
template <typename... A, size_t... I>
inline void call(void (*k)(A...), void** p, std::index_sequence<I...>) {
  k(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(p[I])...);
}
template <auto K>
void invoke(void** p) {
  call(K, p, std::make_index_sequence<arity(K)>{});
}

}  // namespace ls_simt

// ---- the CUDA / HIP device API -------------------------------------------------------
#define threadIdx (::ls_simt::cur->tid)
#define blockIdx (::ls_simt::blk->bid)
#define blockDim (::ls_simt::blk->bdim)
#define gridDim (::ls_simt::blk->gdim)

#define __syncthreads() ((void)::ls_simt::barrier(__LINE__, 0, 0))
#define __syncthreads_and(p) ::ls_simt::barrier(__LINE__, 1, (p) ? 1 : 0)
#define __syncthreads_or(p) ::ls_simt::barrier(__LINE__, 2, (p) ? 1 : 0)
#define __syncthreads_count(p) ::ls_simt::barrier(__LINE__, 3, (p) ? 1 : 0)

// CUDA's *_sync collectives take the full-warp mask everywhere in kernels/.
#define __ballot_sync(mask, p) \
  ((unsigned)::ls_simt::warp_op(__LINE__, ::ls_simt::kBallot, (p) ? 1 : 0, 0, 0))
#define __shfl_down_sync(mask, v, d) ::ls_simt::shfl(__LINE__, ::ls_simt::kShflDown, (v), (int)(d))
#define __shfl_up_sync(mask, v, d) ::ls_simt::shfl(__LINE__, ::ls_simt::kShflUp, (v), (int)(d))
#define __shfl_sync(mask, v, s) ::ls_simt::shfl(__LINE__, ::ls_simt::kShflIdx, (v), (int)(s))
// HIP's wave-wide forms.
#define __ballot(p) \
  ((unsigned long long)::ls_simt::warp_op(__LINE__, ::ls_simt::kBallot, (p) ? 1 : 0, 0, 0))
#define __shfl_down(v, d) ::ls_simt::shfl(__LINE__, ::ls_simt::kShflDown, (v), (int)(d))
#define __shfl_up(v, d) ::ls_simt::shfl(__LINE__, ::ls_simt::kShflUp, (v), (int)(d))
#define __shfl(v, s) ::ls_simt::shfl(__LINE__, ::ls_simt::kShflIdx, (v), (int)(s))

namespace ls_simt {
template <typename T>
inline T shfl(int line, int op, T v, int d) {
  return from_bits<T>(warp_op(line, op, 0, to_bits(v), d));
}
}  // namespace ls_simt

inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }

template <typename T>
inline T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v, std::memory_order_relaxed);
}
inline void unsafeAtomicAdd(float* p, float v) { atomicAdd(p, v); }
inline unsigned atomicOr(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_or(v, std::memory_order_relaxed);
}
// A fence between a block's writes and an atomic (and between the atomic and the
// reads of what other blocks wrote): blocks run on concurrent OS threads.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  return a < b ? a : b;
}
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}
using std::isfinite;

#endif  // LS_SIMT_SCAN
