//! The small interface every GPU runtime implements, and the launch plumbing shared by
//! the host code.

use std::ffi::c_void;

use lsplat_device::{MemoryInfo, Result};

/// A device address (a pointer on the device; for simt, a host address).
pub type DevicePtr = u64;

/// Grid and block dimensions of a launch, and its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks per grid dimension.
    pub grid: [u32; 3],
    /// Threads per block dimension.
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes.
    pub shared_bytes: u32,
}

impl LaunchDims {
    /// A 1-D grid-stride launch over `n` items with `threads` per block (at least one
    /// block, at most 2²⁰: kernels loop over the rest).
    pub fn cover(n: u64, threads: u32) -> Self {
        let blocks = n.div_ceil(threads as u64).clamp(1, 1 << 20) as u32;
        Self::grid(blocks, threads)
    }

    /// `blocks` blocks of `threads` threads.
    pub fn grid(blocks: u32, threads: u32) -> Self {
        LaunchDims {
            grid: [blocks, 1, 1],
            block: [threads, 1, 1],
            shared_bytes: 0,
        }
    }

    /// Total number of blocks.
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| g as u64).product()
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.block.iter().product()
    }
}

/// One GPU runtime: compiles kernel sources, launches kernels, and owns device memory.
/// Every operation is ordered on one stream; only the copies to the host and
/// [`Runtime::synchronize`] wait for the device.
pub trait Runtime: Send + Sync + Sized + 'static {
    /// A compiled kernel family (one source with one set of defines).
    type Module: Send + Sync + 'static;
    /// A kernel of a module.
    type Function: Clone + Send + Sync + 'static;

    /// The runtime's name: `cuda`, `hip` or `simt`.
    const NAME: &'static str;
    /// Whether warp shuffles are cheap (hardware). On simt each one is a round of
    /// fiber switches over the warp, so kernels with a choice avoid them there.
    const CHEAP_SHUFFLES: bool = true;

    /// The device's name.
    fn device_name(&self) -> String;
    /// The device's architecture (`sm_90`, `gfx942`, `x86_64`).
    fn arch(&self) -> String;
    /// Lanes per warp (wavefront).
    fn warp_size(&self) -> u32;
    /// Compiles `source` with `defines` (`-DNAME=VALUE`; the runtime adds
    /// `LS_WARP_SIZE`). `label` names the source in errors.
    fn compile(
        &self,
        label: &str,
        source: &str,
        defines: &[(String, String)],
    ) -> Result<Self::Module>;
    /// Looks up kernel `name` of a module.
    fn function(&self, module: &Self::Module, label: &str, name: &str) -> Result<Self::Function>;
    /// Queues a launch.
    ///
    /// # Safety
    /// `params` holds one pointer per kernel parameter, each pointing at a value of
    /// that parameter's exact type; device pointers among them address live buffers
    /// large enough for everything the kernel touches with these dimensions.
    unsafe fn launch(
        &self,
        f: &Self::Function,
        dims: LaunchDims,
        params: &mut [*mut c_void],
    ) -> Result<()>;
    /// A zeroed allocation of `bytes` (at least one byte is allocated).
    fn alloc(&self, bytes: usize) -> Result<DevicePtr>;
    /// Frees an allocation.
    ///
    /// # Safety
    /// `ptr` came from [`Runtime::alloc`] of this runtime with the same `bytes` and is
    /// freed once; queued work that uses it may still run (frees are stream-ordered).
    unsafe fn free(&self, ptr: DevicePtr, bytes: usize);
    /// Copies `src` to `dst` (stream-ordered; `src` may be reused on return).
    ///
    /// # Safety
    /// `dst` addresses at least `src.len()` bytes of a live allocation.
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;
    /// Copies device bytes to `dst`, waiting for queued work first.
    ///
    /// # Safety
    /// `src` addresses at least `dst.len()` bytes of a live allocation.
    unsafe fn copy_to_host(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()>;
    /// Waits until all queued work is done.
    fn synchronize(&self) -> Result<()>;
    /// Free and total device memory.
    fn memory(&self) -> Option<MemoryInfo>;
}

/// Most parameters a kernel may take.
pub const MAX_ARGS: usize = 16;
const SLOT_WORDS: usize = 16;

/// The parameter values of one launch, stored inline (no allocation), from which a
/// CUDA-style parameter array (one pointer per parameter) is made at launch time.
pub struct KernelArgs {
    slots: [[u64; SLOT_WORDS]; MAX_ARGS],
    len: usize,
}

impl Default for KernelArgs {
    fn default() -> Self {
        Self::new()
    }
}

impl KernelArgs {
    /// No parameters yet.
    pub fn new() -> Self {
        KernelArgs {
            slots: [[0; SLOT_WORDS]; MAX_ARGS],
            len: 0,
        }
    }

    /// Appends a parameter passed by value (a scalar, a device pointer, or a
    /// `repr(C)` struct of at most 128 bytes).
    pub fn push<T: bytemuck::Pod>(&mut self, value: T) -> &mut Self {
        assert!(
            self.len < MAX_ARGS,
            "more than {MAX_ARGS} kernel parameters"
        );
        assert!(size_of::<T>() <= 8 * SLOT_WORDS && align_of::<T>() <= 8);
        let bytes = bytemuck::bytes_of(&value);
        let slot: &mut [u8] = bytemuck::cast_slice_mut(&mut self.slots[self.len][..]);
        slot[..bytes.len()].copy_from_slice(bytes);
        self.len += 1;
        self
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True with no parameters.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The parameter array (valid while `self` is neither moved nor changed).
    pub fn pointers(&mut self) -> [*mut c_void; MAX_ARGS] {
        let mut p = [std::ptr::null_mut(); MAX_ARGS];
        for (dst, slot) in p.iter_mut().zip(self.slots.iter_mut()).take(self.len) {
            *dst = slot.as_mut_ptr().cast();
        }
        p
    }
}
