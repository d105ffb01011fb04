//! Typed device buffers over raw bytes, so any [`Element`] fits one type.

use cudarc::driver::PushKernelArg;
use std::marker::PhantomData;

use cudarc::driver::CudaSlice;
use lsplat_device::{DeviceError, Element};
use lsplat_kernels::Kernel;

use crate::gpu::{Gpu, drv, grid};

/// A device buffer of `len` elements of `T` (stored as bytes).
pub struct CudaBuf<T> {
    pub(crate) raw: CudaSlice<u8>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Element> CudaBuf<T> {
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
}

/// A zeroed buffer of `len` elements (at least 4 bytes are allocated, so empty
/// buffers still have a valid device address).
pub(crate) fn alloc<T: Element>(gpu: &Gpu, len: usize) -> Result<CudaBuf<T>, DeviceError> {
    let bytes = len * size_of::<T>();
    let raw = gpu
        .stream
        .alloc_zeros::<u8>(bytes.max(4))
        .map_err(|e| match drv(e) {
            DeviceError::OutOfMemory { .. } => DeviceError::OutOfMemory { bytes },
            other => other,
        })?;
    Ok(CudaBuf {
        raw,
        len,
        _t: PhantomData,
    })
}

/// A buffer holding a copy of `data`.
pub(crate) fn upload<T: Element>(gpu: &Gpu, data: &[T]) -> Result<CudaBuf<T>, DeviceError> {
    let mut buf = alloc::<T>(gpu, data.len())?;
    if !data.is_empty() {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let mut dst = buf.raw.slice_mut(0..bytes.len());
        gpu.stream.memcpy_htod(bytes, &mut dst).map_err(drv)?;
    }
    Ok(buf)
}

/// Copies a buffer to the host (waits for the stream).
pub(crate) fn download<T: Element>(gpu: &Gpu, buf: &CudaBuf<T>) -> Result<Vec<T>, DeviceError> {
    if buf.len == 0 {
        return Ok(Vec::new());
    }
    let bytes = gpu
        .stream
        .clone_dtoh(&buf.raw.slice(0..buf.bytes()))
        .map_err(drv)?;
    let mut out = vec![T::default(); buf.len];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
    Ok(out)
}

/// Reads element `index` of a u32 buffer (waits for the stream).
pub(crate) fn read_u32(gpu: &Gpu, buf: &CudaBuf<u32>, index: usize) -> Result<u32, DeviceError> {
    let bytes = gpu
        .stream
        .clone_dtoh(&buf.raw.slice(4 * index..4 * index + 4))
        .map_err(drv)?;
    Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Sets every element to `value`.
pub(crate) fn fill<T: Element>(
    gpu: &Gpu,
    buf: &mut CudaBuf<T>,
    value: T,
) -> Result<(), DeviceError> {
    let n = buf.len as u64;
    if n == 0 {
        return Ok(());
    }
    let bits: &[u8] = bytemuck::bytes_of(&value);
    let cfg = grid(n, 256);
    macro_rules! go {
        ($name:literal, $t:ty) => {{
            let v: $t = bytemuck::pod_read_unaligned(bits);
            let f = gpu.function(Kernel::Util, 0, 0, $name)?;
            let mut b = gpu.stream.launch_builder(&f);
            b.arg(&buf.raw).arg(&n).arg(&v);
            // SAFETY: matches `ls_fill_*(T* p, u64 n, T value)` in util.cu; the buffer
            // holds n elements of the kernel's element size.
            unsafe { b.launch(cfg) }.map_err(drv)?;
        }};
    }
    match size_of::<T>() {
        1 => go!("ls_fill_u8", u8),
        2 => go!("ls_fill_u16", u16),
        4 => go!("ls_fill_u32", u32),
        8 => go!("ls_fill_u64", u64),
        s => {
            return Err(DeviceError::shape(
                "fill",
                format!("{s}-byte elements are not supported"),
            ));
        }
    }
    Ok(())
}
