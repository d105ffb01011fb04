//! The simt suite can fail: deliberately broken copies of the block scan (one
//! `__syncthreads` removed; an off-by-one in the warp scan) are compiled and run, and
//! the comparison with a host scan catches each under the random schedule. The
//! missing barrier is invisible under the in-order schedule, which is why the suite
//! runs several. A kernel that reads shared memory no thread of its block wrote is
//! caught too: simt poisons `__shared__` memory before every block.

mod common;

use lsplat_core::Rng;
use lsplat_device::Backend;
use lsplat_gpu::simt::Schedule;
use lsplat_gpu::{KernelArgs, LaunchDims, SimtBackend};
use lsplat_kernels::Kernel;

const BLOCK: usize = 1024; // LS_SCAN_BLOCK of util.cu

/// Per-block exclusive scans of `input` by `ls_scan_block` compiled from `source`.
fn scan(gpu: &SimtBackend, label: &str, source: &str, input: &[u32]) -> Vec<u32> {
    let defines = lsplat_kernels::defines(16, 1);
    let f = gpu
        .gpu()
        .source_function(label, source, &defines, "ls_scan_block")
        .unwrap();
    let n = input.len();
    let blocks = n.div_ceil(BLOCK);
    let inb = gpu.upload(input).unwrap();
    let out = gpu.alloc::<u32>(n).unwrap();
    let sums = gpu.alloc::<u32>(blocks).unwrap();
    let mut a = KernelArgs::new();
    a.push(inb.ptr())
        .push(out.ptr())
        .push(n as u32)
        .push(sums.ptr());
    let mut p = a.pointers();
    // SAFETY: `ls_scan_block(const u32* in, u32* out, u32 n, u32* block_sums)` with n
    // elements in and out and one sum per block of 256 threads.
    unsafe {
        lsplat_gpu::Runtime::launch(
            gpu.runtime(),
            &f,
            LaunchDims::grid(blocks as u32, 256),
            &mut p[..4],
        )
    }
    .unwrap();
    gpu.download(&out).unwrap()
}

fn host_scan(input: &[u32]) -> Vec<u32> {
    input
        .chunks(BLOCK)
        .flat_map(|c| {
            c.iter().scan(0u32, |run, &v| {
                let e = *run;
                *run += v;
                Some(e)
            })
        })
        .collect()
}

fn input() -> Vec<u32> {
    let mut rng = Rng::new(common::seed());
    (0..6 * BLOCK + 77).map(|_| rng.below(100) as u32).collect()
}

/// `util.cu` with `from` replaced by `to` (exactly once).
fn broken(from: &str, to: &str) -> String {
    let src = Kernel::Util.source();
    assert_eq!(src.matches(from).count(), 1, "pattern {from:?} not unique");
    src.replacen(from, to, 1)
}

const SECOND_BARRIER: &str = "    block_total = run;\n  }\n  __syncthreads();";

#[test]
fn intact_scan_passes_under_every_schedule() {
    let x = input();
    for schedule in [Schedule::InOrder, Schedule::Reverse, Schedule::Random] {
        for warp in [32, 64] {
            let Some(gpu) = common::simt(warp, schedule) else {
                return;
            };
            let got = scan(&gpu, "util.cu", &Kernel::Util.source(), &x);
            assert_eq!(got, host_scan(&x), "{schedule:?}, warp {warp}");
        }
    }
}

#[test]
fn missing_barrier_is_caught_by_the_random_schedule() {
    let x = input();
    let src = broken(SECOND_BARRIER, "    block_total = run;\n  }");
    let Some(gpu) = common::simt(32, Schedule::Random) else {
        return;
    };
    let got = scan(&gpu, "util.cu (no barrier)", &src, &x);
    let wrong = got
        .iter()
        .zip(host_scan(&x))
        .filter(|(a, b)| **a != *b)
        .count();
    assert!(wrong > 0, "the random schedule missed the removed barrier");
    eprintln!("random schedule: {wrong} of {} wrong", x.len());
    // Thread 0 writes the warp offsets before the others read them when threads run
    // in order, so that schedule alone cannot see this bug.
    let gpu = common::simt(32, Schedule::InOrder).unwrap();
    assert_eq!(scan(&gpu, "util.cu (no barrier)", &src, &x), host_scan(&x));
}

#[test]
fn off_by_one_in_the_scan_is_caught() {
    let x = input();
    let src = broken("if (lane >= d) incl += t;", "if (lane > d) incl += t;");
    for warp in [32, 64] {
        let Some(gpu) = common::simt(warp, Schedule::Random) else {
            return;
        };
        let got = scan(&gpu, "util.cu (off by one)", &src, &x);
        assert_ne!(got, host_scan(&x), "warp {warp}: off-by-one not caught");
    }
}

/// A block sum over shared memory of which only the first `written` entries were
/// written: a read of shared memory that no thread of the block wrote.
const UNWRITTEN_SHARED: &str = r#"
extern "C" __global__ void __launch_bounds__(256) sum_shared(unsigned written, float* out) {
  __shared__ float s[256];
  if (threadIdx.x < written) s[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (unsigned i = 0; i < blockDim.x; i++) t += s[i];  // bug: i < written
    out[blockIdx.x] = t;
  }
}
"#;

fn sum_shared(gpu: &SimtBackend, written: u32, blocks: u32) -> Vec<f32> {
    let f = gpu
        .gpu()
        .source_function("unwritten_shared.cu", UNWRITTEN_SHARED, &[], "sum_shared")
        .unwrap();
    let out = gpu.alloc::<f32>(blocks as usize).unwrap();
    let mut a = KernelArgs::new();
    a.push(written).push(out.ptr());
    let mut p = a.pointers();
    // SAFETY: `sum_shared(unsigned, float*)` with one output per block.
    unsafe {
        lsplat_gpu::Runtime::launch(
            gpu.runtime(),
            &f,
            LaunchDims::grid(blocks, 256),
            &mut p[..2],
        )
    }
    .unwrap();
    gpu.download(&out).unwrap()
}

/// Shared memory is poisoned before every block, so the stale values of the previous
/// launch (all 256 entries written, sum 256) cannot stand in for the unwritten half:
/// every block's sum is NaN, whatever the schedule.
#[test]
fn a_read_of_unwritten_shared_memory_is_caught() {
    for schedule in [Schedule::InOrder, Schedule::Random] {
        let Some(gpu) = common::simt(32, schedule) else {
            return;
        };
        assert!(sum_shared(&gpu, 256, 8).iter().all(|&s| s == 256.0));
        let got = sum_shared(&gpu, 128, 8);
        assert!(
            got.iter().all(|s| s.is_nan()),
            "{schedule:?}: unwritten shared memory went unnoticed: {got:?}"
        );
    }
}
