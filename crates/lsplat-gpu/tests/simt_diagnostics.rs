//! Misused launches and kernels on the simt runtime stop with a clear error naming the
//! kernel, block, thread and line — never a hang.

mod common;

use lsplat_device::Backend;
use lsplat_gpu::simt::Schedule;
use lsplat_gpu::{KernelArgs, LaunchDims, Runtime, SimtBackend};

const SOURCE: &str = r#"
extern "C" __global__ void lane_skips_shuffle(unsigned* out) {
  if (threadIdx.x != 5) out[threadIdx.x] = __shfl_down_sync(0xffffffffu, threadIdx.x, 1);
}
extern "C" __global__ void split_barrier(unsigned* out) {
  if (threadIdx.x < 10) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}
extern "C" __global__ void exits_before_barrier(unsigned* out) {
  if (threadIdx.x == 3) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
extern "C" __global__ void barrier_inside_warp_op(unsigned* out) {
  if (threadIdx.x == 0) __syncthreads();
  else out[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
}
extern "C" __global__ void writes_past_the_end(unsigned* out) {
  out[threadIdx.x + 1024] = 7;
}
extern "C" __global__ void __launch_bounds__(64) bounded(unsigned* out) {
  out[threadIdx.x] = __syncthreads_count(threadIdx.x % 2 == 0);
}
"#;

fn run(gpu: &SimtBackend, name: &str, threads: u32) -> Result<Vec<u32>, String> {
    let f = gpu
        .gpu()
        .source_function("diagnostics.cu", SOURCE, &[], name)
        .map_err(|e| e.to_string())?;
    let out = gpu.alloc::<u32>(threads as usize).unwrap();
    let mut a = KernelArgs::new();
    a.push(out.ptr());
    let mut p = a.pointers();
    // SAFETY: every kernel above takes one `unsigned*` with a slot per thread.
    unsafe {
        gpu.runtime()
            .launch(&f, LaunchDims::grid(1, threads), &mut p[..1])
    }
    .map_err(|e| e.to_string())?;
    Ok(gpu.download(&out).unwrap())
}

fn expect_error(name: &str, threads: u32, needles: &[&str]) {
    for schedule in [Schedule::InOrder, Schedule::Random] {
        let Some(gpu) = common::simt(32, schedule) else {
            return;
        };
        let e = run(&gpu, name, threads).expect_err(name);
        for n in needles {
            assert!(e.contains(n), "{name}: {n:?} missing from: {e}");
        }
        eprintln!("{name}: {e}");
    }
}

#[test]
fn a_lane_that_skips_a_warp_collective_is_named() {
    expect_error(
        "lane_skips_shuffle",
        64,
        &["lane_skips_shuffle", "thread 5", "line 3"],
    );
}

#[test]
fn barriers_at_different_lines_are_reported() {
    expect_error(
        "split_barrier",
        32,
        &["different barriers", "lines 7 and 9"],
    );
}

#[test]
fn a_thread_exiting_before_a_barrier_is_reported() {
    expect_error(
        "exits_before_barrier",
        32,
        &["thread 3 exited", "__syncthreads"],
    );
}

#[test]
fn a_warp_split_between_barrier_and_ballot_is_a_deadlock_not_a_hang() {
    expect_error("barrier_inside_warp_op", 32, &["deadlock"]);
}

#[test]
fn launch_bounds_and_block_limits_are_checked() {
    expect_error("bounded", 128, &["__launch_bounds__(64)"]);
    expect_error("bounded", 2048, &["at most 1024"]);
    let gpu = common::simt(32, Schedule::Random).unwrap();
    let counts = run(&gpu, "bounded", 64).unwrap();
    assert!(
        counts.iter().all(|&c| c == 32),
        "__syncthreads_count: {counts:?}"
    );
}

#[test]
fn a_missing_kernel_is_named() {
    let Some(gpu) = common::simt(32, Schedule::InOrder) else {
        return;
    };
    let e = run(&gpu, "no_such_kernel", 32).unwrap_err();
    assert!(
        e.contains("no_such_kernel") && e.contains("split_barrier"),
        "{e}"
    );
}

#[test]
fn compile_errors_carry_the_compiler_log() {
    let Some(gpu) = common::simt(32, Schedule::InOrder) else {
        return;
    };
    let e = gpu
        .gpu()
        .source_function(
            "bad.cu",
            "extern \"C\" __global__ void k() { nope; }",
            &[],
            "k",
        )
        .err()
        .expect("compile error")
        .to_string();
    assert!(e.contains("bad.cu") && e.contains("nope"), "{e}");
}

/// An overrun faults at once (the buffer ends against a PROT_NONE page), and the fault
/// names the kernel, block and thread. The process dies, so the launch runs in a child.
#[test]
fn an_out_of_bounds_write_faults_and_names_the_kernel() {
    if std::env::var_os("LS_SIMT_FAULT_CHILD").is_some() {
        let gpu = common::simt(32, Schedule::InOrder).unwrap();
        let _ = run(&gpu, "writes_past_the_end", 32);
        eprintln!("the overrun did not fault");
        std::process::exit(0);
    }
    if common::simt(32, Schedule::InOrder).is_none() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_out_of_bounds_write_faults_and_names_the_kernel",
            "--nocapture",
        ])
        .env("LS_SIMT_FAULT_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "child survived the overrun: {err}");
    for needle in ["memory fault", "writes_past_the_end", "block 0", "thread 0"] {
        assert!(err.contains(needle), "{needle:?} missing from: {err}");
    }
}

/// Without a C++ compiler the runtime says what to install. The compiler is looked up
/// once per process, so the check runs in a child with `CXX` naming no program.
#[test]
fn no_cxx_compiler_names_what_to_install() {
    if std::env::var_os("LS_SIMT_NO_CXX_CHILD").is_some() {
        match lsplat_gpu::simt::Simt::new(Default::default()) {
            Ok(_) => eprintln!("opened without a compiler"),
            Err(e) => eprintln!("error: {e}"),
        }
        std::process::exit(0);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "no_cxx_compiler_names_what_to_install",
            "--nocapture",
        ])
        .env("LS_SIMT_NO_CXX_CHILD", "1")
        .env("CXX", "/nonexistent/lsplat-no-such-c++")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "the `simt` backend is unavailable",
        "apt-get install g++",
        "/nonexistent/lsplat-no-such-c++",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from: {err}");
    }
}
