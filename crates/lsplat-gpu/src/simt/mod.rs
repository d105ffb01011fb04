//! The `simt` runtime: the CPU executes the kernels of `kernels/` (see
//! `kernels/simt.h` for the execution model).
//!
//! Kernel sources are compiled at run time by the system C++ compiler into shared
//! objects (cached on disk, [`compile::cache_dir`]) and loaded with libloading. A
//! launch runs its blocks on a persistent pool of OS threads; within a block, threads
//! are fibers scheduled between synchronisation points in the order [`Schedule`]
//! asks for. Launches complete before they return, so stream order holds trivially.

pub mod compile;
mod mem;
mod pool;

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use lsplat_device::{DeviceError, MemoryInfo, Result};

use crate::runtime::{DevicePtr, LaunchDims, Runtime};

/// The order in which a block's fibers run between synchronisation points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Thread 0, 1, 2, … (the order most GPUs' warps happen to retire in).
    #[default]
    InOrder,
    /// The last thread first.
    Reverse,
    /// A fresh seeded permutation every round.
    Random,
}

/// Options of the simt runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimtOptions {
    /// Lanes per warp: 32 (CUDA semantics) or 64 (the wave64 branch of compat.h).
    pub warp: u32,
    /// Fiber order between synchronisation points.
    pub schedule: Schedule,
    /// Seed of the random schedule.
    pub seed: u64,
    /// OS threads running blocks; 0 = one per available core.
    pub threads: usize,
}

impl Default for SimtOptions {
    fn default() -> Self {
        SimtOptions {
            warp: 32,
            schedule: Schedule::InOrder,
            seed: 0,
            threads: 0,
        }
    }
}

/// The launch as `ls_simt::Launch` in simt.h lays it out.
#[repr(C)]
struct SimtLaunch {
    grid: [u32; 3],
    block: [u32; 3],
    block_index: u32,
    schedule: c_int,
    seed: u64,
    error: *mut c_char,
    error_len: u32,
    current_thread: *mut u32,
}

type RunFn = unsafe extern "C" fn(*const SimtLaunch, *mut *mut c_void) -> c_int;

/// A compiled kernel family.
pub struct SimtModule {
    lib: Arc<libloading::Library>,
    names: Vec<String>,
}

/// A kernel of a module.
#[derive(Clone)]
pub struct SimtFunction {
    run: RunFn,
    label: Arc<str>,
    _lib: Arc<libloading::Library>,
}

/// The CPU as a SIMT device.
pub struct Simt {
    options: SimtOptions,
    compiler: compile::Compiler,
    pool: pool::Pool,
    memory: mem::Memory,
    launches: AtomicU64,
}

/// Whether this platform can run the simt runtime (Linux on x86-64 or aarch64).
pub const SUPPORTED: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: "simt",
        reason: reason.into(),
    }
}

impl Simt {
    /// Opens the runtime: checks the platform, the options and the C++ compiler.
    pub fn new(options: SimtOptions) -> Result<Simt> {
        if !SUPPORTED {
            return Err(unavailable(
                "not supported on this platform (Linux on x86-64 or aarch64 only)",
            ));
        }
        if options.warp != 32 && options.warp != 64 {
            return Err(unavailable(format!(
                "warp size {} (supported: 32, 64)",
                options.warp
            )));
        }
        let compiler = compile::compiler()?;
        let threads = match options.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t,
        };
        Ok(Simt {
            options,
            compiler,
            pool: pool::Pool::new(threads),
            memory: mem::Memory::default(),
            launches: AtomicU64::new(0),
        })
    }

    /// The options in effect.
    pub fn options(&self) -> SimtOptions {
        self.options
    }

    /// The C++ compiler in use.
    pub fn compiler(&self) -> &compile::Compiler {
        &self.compiler
    }

    /// OS threads running blocks.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }
}

fn mix(seed: u64, launch: u64, block: u64) -> u64 {
    let mut z = seed ^ launch.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ block.rotate_left(32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^ (z >> 27)
}

/// Raw parameter pointers shared by the workers of one launch (read only).
struct Params(*mut *mut c_void);
// SAFETY: the parameter array is only read (kernels copy their arguments) while the
// launch runs, and the launch waits for every worker before returning.
unsafe impl Sync for Params {}

impl Params {
    fn get(&self) -> *mut *mut c_void {
        self.0
    }
}

impl Runtime for Simt {
    type Module = SimtModule;
    type Function = SimtFunction;
    const NAME: &'static str = "simt";
    const CHEAP_SHUFFLES: bool = false;

    fn device_name(&self) -> String {
        format!(
            "CPU ({} threads, {}, schedule {:?})",
            self.pool.threads(),
            self.compiler.version,
            self.options.schedule
        )
    }

    fn arch(&self) -> String {
        std::env::consts::ARCH.to_string()
    }

    fn warp_size(&self) -> u32 {
        self.options.warp
    }

    fn compile(
        &self,
        label: &str,
        source: &str,
        defines: &[(String, String)],
    ) -> Result<SimtModule> {
        let built = compile::build(label, source, defines, self.options.warp)?;
        // Kernel libraries are never unloaded (RTLD_NODELETE): each installs a fault
        // handler that must stay valid for the life of the process.
        let flags = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
        // SAFETY: the library was built by `compile::build` from our own sources and
        // runs no initialisers beyond C++ static setup of plain data.
        let lib = unsafe { libloading::os::unix::Library::open(Some(&built.path), flags) }
            .map(libloading::Library::from)
            .map_err(|e| DeviceError::Kernel {
                kernel: label.to_string(),
                message: format!("loading {} failed: {e}", built.path.display()),
            })?;
        Ok(SimtModule {
            lib: Arc::new(lib),
            names: built.kernels.into_iter().map(|k| k.name).collect(),
        })
    }

    fn function(&self, module: &SimtModule, label: &str, name: &str) -> Result<SimtFunction> {
        let missing = || DeviceError::Kernel {
            kernel: format!("{label}::{name}"),
            message: format!(
                "no such kernel in the module (it has: {})",
                module.names.join(", ")
            ),
        };
        if !module.names.iter().any(|n| n == name) {
            return Err(missing());
        }
        let symbol = format!("ls_simt_run_{name}\0");
        // SAFETY: every `ls_simt_run_*` symbol is a generated trampoline with exactly
        // the `RunFn` signature.
        let run = unsafe { module.lib.get::<RunFn>(symbol.as_bytes()) }.map_err(|_| missing())?;
        Ok(SimtFunction {
            run: *run,
            label: format!("{label}::{name}").into(),
            _lib: module.lib.clone(),
        })
    }

    unsafe fn launch(
        &self,
        f: &SimtFunction,
        dims: LaunchDims,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let bad = |message: String| DeviceError::Kernel {
            kernel: f.label.to_string(),
            message,
        };
        if dims.grid.contains(&0) || dims.block.contains(&0) {
            return Err(bad(format!("empty launch {dims:?}")));
        }
        if dims.threads() > 1024 {
            return Err(bad(format!(
                "{} threads per block (at most 1024)",
                dims.threads()
            )));
        }
        if dims.shared_bytes > 0 {
            return Err(bad("dynamic shared memory is not supported by simt".into()));
        }
        let blocks = dims.blocks();
        if blocks > u32::MAX as u64 {
            return Err(bad(format!("{blocks} blocks")));
        }
        let launch = self.launches.fetch_add(1, Ordering::Relaxed);
        let next = AtomicU64::new(0);
        let failed = AtomicBool::new(false);
        let error = std::sync::Mutex::new(None::<String>);
        let p = Params(params.as_mut_ptr());
        let schedule = match self.options.schedule {
            Schedule::InOrder => 0,
            Schedule::Reverse => 1,
            Schedule::Random => 2,
        };
        let job = |_worker: usize| {
            let current = AtomicU32::new(0);
            let mut msg = [0u8; 1024];
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= blocks || failed.load(Ordering::Relaxed) {
                    break;
                }
                let l = SimtLaunch {
                    grid: dims.grid,
                    block: dims.block,
                    block_index: b as u32,
                    schedule,
                    seed: mix(self.options.seed, launch, b),
                    error: msg.as_mut_ptr().cast(),
                    error_len: msg.len() as u32,
                    current_thread: current.as_ptr(),
                };
                // SAFETY: `run` is a generated trampoline; `l` and its buffers live for
                // the call; the caller of `launch` guarantees the parameter array fits
                // the kernel.
                let rc = unsafe { (f.run)(&l, p.get()) };
                if rc != 0 {
                    failed.store(true, Ordering::Relaxed);
                    let end = msg.iter().position(|&c| c == 0).unwrap_or(msg.len());
                    let text = String::from_utf8_lossy(&msg[..end]).into_owned();
                    error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(text);
                    break;
                }
            }
        };
        if blocks == 1 {
            job(0);
        } else {
            self.pool.run(&job);
        }
        match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some(m) => Err(bad(m)),
        }
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.memory.alloc(bytes)
    }

    unsafe fn free(&self, ptr: DevicePtr, _bytes: usize) {
        self.memory.free(ptr);
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the caller guarantees `dst` addresses `src.len()` bytes of a live
        // allocation (host memory of this runtime), which cannot overlap `src`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    unsafe fn copy_to_host(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: as above, in the other direction.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn memory(&self) -> Option<MemoryInfo> {
        mem::host_memory().map(|(free, total)| MemoryInfo { free, total })
    }
}
