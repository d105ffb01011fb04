//! Typed device buffers over raw allocations, so any [`Element`] fits one type.

use std::marker::PhantomData;
use std::sync::Arc;

use lsplat_device::{DeviceError, Element, Result};
use lsplat_kernels::Kernel;

use crate::gpu::Gpu;
use crate::runtime::{DevicePtr, KernelArgs, LaunchDims, Runtime};

/// A device buffer of `len` elements of `T`.
pub struct GpuBuf<R: Runtime, T> {
    ptr: DevicePtr,
    len: usize,
    rt: Arc<R>,
    _t: PhantomData<T>,
}

impl<R: Runtime, T: Element> GpuBuf<R, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The device address (a kernel parameter).
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }
}

impl<R: Runtime, T> Drop for GpuBuf<R, T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated by `alloc` below with exactly this byte count
        // and is freed only here; frees are stream-ordered after queued work.
        unsafe { self.rt.free(self.ptr, alloc_bytes::<T>(self.len)) };
    }
}

fn alloc_bytes<T>(len: usize) -> usize {
    (len * size_of::<T>()).max(4)
}

/// A zeroed buffer of `len` elements (at least 4 bytes are allocated, so an empty
/// buffer still has a valid device address).
pub(crate) fn alloc<R: Runtime, T: Element>(gpu: &Gpu<R>, len: usize) -> Result<GpuBuf<R, T>> {
    let bytes = len
        .checked_mul(size_of::<T>())
        .ok_or(DeviceError::OutOfMemory { bytes: usize::MAX })?;
    let ptr = gpu.rt.alloc(alloc_bytes::<T>(len)).map_err(|e| match e {
        DeviceError::OutOfMemory { .. } => DeviceError::OutOfMemory { bytes },
        other => other,
    })?;
    Ok(GpuBuf {
        ptr,
        len,
        rt: gpu.rt.clone(),
        _t: PhantomData,
    })
}

/// A buffer holding a copy of `data`.
pub(crate) fn upload<R: Runtime, T: Element>(gpu: &Gpu<R>, data: &[T]) -> Result<GpuBuf<R, T>> {
    let buf = alloc::<R, T>(gpu, data.len())?;
    if !data.is_empty() {
        // SAFETY: the buffer holds exactly `data.len()` elements.
        unsafe { gpu.rt.copy_to_device(buf.ptr, bytemuck::cast_slice(data))? };
    }
    Ok(buf)
}

/// Copies a buffer to the host (waits for the device).
pub(crate) fn download<R: Runtime, T: Element>(gpu: &Gpu<R>, buf: &GpuBuf<R, T>) -> Result<Vec<T>> {
    let mut out = vec![T::default(); buf.len];
    if buf.len > 0 {
        // SAFETY: the buffer holds `len` elements, the size of `out`.
        unsafe {
            gpu.rt
                .copy_to_host(buf.ptr, bytemuck::cast_slice_mut(&mut out))?
        };
    }
    Ok(out)
}

/// Copies a buffer into `out` (same length; waits for the device).
pub(crate) fn download_into<R: Runtime, T: Element>(
    gpu: &Gpu<R>,
    buf: &GpuBuf<R, T>,
    out: &mut [T],
) -> Result<()> {
    lsplat_device::check_same_len("download_into", buf.len, out.len())?;
    if buf.len > 0 {
        // SAFETY: the buffer holds `len` elements, the size of `out` (checked).
        unsafe {
            gpu.rt
                .copy_to_host(buf.ptr, bytemuck::cast_slice_mut(out))?
        };
    }
    Ok(())
}

/// Overwrites a buffer with `data` (same length).
pub(crate) fn upload_into<R: Runtime, T: Element>(
    gpu: &Gpu<R>,
    buf: &mut GpuBuf<R, T>,
    data: &[T],
) -> Result<()> {
    lsplat_device::check_same_len("upload_into", buf.len, data.len())?;
    if buf.len > 0 {
        // SAFETY: the buffer holds `len` elements, the size of `data` (checked).
        unsafe { gpu.rt.copy_to_device(buf.ptr, bytemuck::cast_slice(data))? };
    }
    Ok(())
}

/// Sets every element to `value`.
pub(crate) fn fill<R: Runtime, T: Element>(
    gpu: &Gpu<R>,
    buf: &mut GpuBuf<R, T>,
    value: T,
) -> Result<()> {
    let n = buf.len as u64;
    if n == 0 {
        return Ok(());
    }
    let bits: &[u8] = bytemuck::bytes_of(&value);
    let mut a = KernelArgs::new();
    a.push(buf.ptr).push(n);
    let name = match size_of::<T>() {
        1 => {
            a.push(bits[0]);
            "ls_fill_u8"
        }
        2 => {
            a.push(bytemuck::pod_read_unaligned::<u16>(bits));
            "ls_fill_u16"
        }
        4 => {
            a.push(bytemuck::pod_read_unaligned::<u32>(bits));
            "ls_fill_u32"
        }
        8 => {
            a.push(bytemuck::pod_read_unaligned::<u64>(bits));
            "ls_fill_u64"
        }
        s => {
            return Err(DeviceError::shape(
                "fill",
                format!("{s}-byte elements are not supported"),
            ));
        }
    };
    // SAFETY: matches `ls_fill_*(T* p, u64 n, T value)` in util.cu with the element
    // size of the buffer, which holds n elements.
    unsafe { gpu.launch(Kernel::Util, 0, 0, name, LaunchDims::cover(n, 256), &mut a) }
}
