//! Per-element ops: losses, V1 normalisation and its backward, fused Adam.

use lsplat_core::config::LossKind;
use lsplat_device::{AdamParams, DeviceError, GroundTruth};
use lsplat_kernels::Kernel;

use crate::GpuBackend;
use crate::buf::{GpuBuf, alloc};
use crate::gpu::Gpu;
use crate::runtime::{KernelArgs, LaunchDims, Runtime};

const LOSS_THREADS: u32 = 256; // LS_LOSS_THREADS in loss.cu

pub(crate) fn pixel_loss<R: Runtime>(
    gpu: &Gpu<R>,
    kind: LossKind,
    rendered: &GpuBuf<R, f32>,
    gt: &GroundTruth<GpuBackend<R>>,
    weight: f32,
    d_rendered: &mut GpuBuf<R, f32>,
    loss: &mut GpuBuf<R, f32>,
    slot: usize,
    accumulate: bool,
) -> Result<(), DeviceError> {
    let (c, v) = (gt.channels, gt.pixels.len);
    let hw = gt.pixels.grid.pixel_count();
    // Scales exactly as the CPU backend forms them.
    let l1_scale = 1.0 / (c as f64 * hw as f64);
    let cos_scale = 1.0 / hw as f64;
    let l1_grad = (weight as f64 * l1_scale) as f32;
    let cos_grad = weight * cos_scale as f32;
    let k: i32 = match kind {
        LossKind::MaskedL1 => 0,
        LossKind::Cosine => 1,
        LossKind::L1Cosine => 2,
    };
    let blocks = v.div_ceil(LOSS_THREADS as usize);
    crate::algo::check_u32("pixel_loss", "valid pixels", v)?;
    let mut scratch = crate::gpu::lock(&gpu.partials);
    if scratch.as_ref().is_none_or(|b| b.len() < 2 * blocks) {
        *scratch = Some(alloc::<R, f64>(gpu, 2 * blocks)?);
    }
    let partials = scratch.as_ref().expect("allocated above");
    if v > 0 {
        let mut a = KernelArgs::new();
        a.push(k)
            .push(rendered.ptr())
            .push(gt.mask.ptr())
            .push(gt.table.ptr())
            .push(v as u32)
            .push(c as u32)
            .push(l1_grad)
            .push(cos_grad)
            .push(d_rendered.ptr())
            .push(partials.ptr());
        let dims = LaunchDims::grid(blocks as u32, LOSS_THREADS);
        // SAFETY: matches `ls_pixel_loss(int kind, const float* f, const u32* mask,
        // const float* table, u32 v, u32 c, float l1_grad, float cos_grad, float* d,
        // double* partials)`; shapes checked by the caller (rendered, d: v·C; mask: v;
        // partials: 2 per block; mask rows < table rows by GroundTruth's contract).
        unsafe { gpu.launch(Kernel::Loss, 0, 0, "ls_pixel_loss", dims, &mut a)? };
    }
    let l1s = if k == 1 { 0.0 } else { l1_scale };
    let coss = if k == 0 { 0.0 } else { cos_scale };
    let mut a = KernelArgs::new();
    a.push(partials.ptr())
        .push(blocks as u32)
        .push(l1s)
        .push(coss)
        .push(weight as f64)
        .push(loss.ptr())
        .push(slot as u32)
        .push(accumulate as i32);
    let dims = LaunchDims::grid(1, LOSS_THREADS);
    // SAFETY: matches `ls_loss_finish(const double* partials, u32 blocks, double
    // l1_scale, double cos_scale, double weight, float* loss, u32 slot, int
    // accumulate)`; slot < loss.len() was checked by the caller.
    unsafe { gpu.launch(Kernel::Loss, 0, 0, "ls_loss_finish", dims, &mut a) }
}

pub(crate) fn normalize<R: Runtime>(
    gpu: &Gpu<R>,
    x: &GpuBuf<R, f32>,
    channels: usize,
    out: &mut GpuBuf<R, f32>,
) -> Result<(), DeviceError> {
    let rows = x.len() / channels;
    if rows == 0 {
        return Ok(());
    }
    crate::algo::check_u32("normalize", "rows", rows)?;
    let mut a = KernelArgs::new();
    a.push(x.ptr())
        .push(rows as u32)
        .push(channels as u32)
        .push(out.ptr());
    let dims = LaunchDims::cover(rows as u64, 256);
    // SAFETY: matches `ls_normalize(const float* x, u32 rows, u32 c, float* out)`;
    // x and out hold rows·c floats.
    unsafe { gpu.launch(Kernel::Optim, 0, 0, "ls_normalize", dims, &mut a) }
}

pub(crate) fn normalize_backward<R: Runtime>(
    gpu: &Gpu<R>,
    x: &GpuBuf<R, f32>,
    d_out: &GpuBuf<R, f32>,
    channels: usize,
    d_x: &mut GpuBuf<R, f32>,
) -> Result<(), DeviceError> {
    let rows = x.len() / channels;
    if rows == 0 {
        return Ok(());
    }
    crate::algo::check_u32("normalize_backward", "rows", rows)?;
    let mut a = KernelArgs::new();
    a.push(x.ptr())
        .push(d_out.ptr())
        .push(rows as u32)
        .push(channels as u32)
        .push(d_x.ptr());
    let dims = LaunchDims::cover(rows as u64, 256);
    // SAFETY: matches `ls_normalize_backward(const float* x, const float* d, u32 rows,
    // u32 c, float* d_x)`; all hold rows·c floats.
    unsafe { gpu.launch(Kernel::Optim, 0, 0, "ls_normalize_backward", dims, &mut a) }
}

pub(crate) fn adam<R: Runtime>(
    gpu: &Gpu<R>,
    p: &mut GpuBuf<R, f32>,
    g: &GpuBuf<R, f32>,
    m: &mut GpuBuf<R, f32>,
    v: &mut GpuBuf<R, f32>,
    hp: &AdamParams,
) -> Result<(), DeviceError> {
    let n = p.len() as u64;
    if n == 0 {
        return Ok(());
    }
    // The bias corrections exactly as the CPU backend forms them.
    let t = hp.step.max(1) as i32;
    let bc1 = 1.0 - (hp.beta1 as f64).powi(t);
    let bc2 = 1.0 - (hp.beta2 as f64).powi(t);
    let step_size = (hp.lr as f64 / bc1) as f32;
    let inv_sqrt_bc2 = (1.0 / bc2.sqrt()) as f32;
    let mut a = KernelArgs::new();
    a.push(p.ptr())
        .push(g.ptr())
        .push(m.ptr())
        .push(v.ptr())
        .push(n)
        .push(step_size)
        .push(inv_sqrt_bc2)
        .push(hp.beta1)
        .push(hp.beta2)
        .push(hp.eps)
        .push(hp.grad_scale);
    let dims = LaunchDims::cover(n, 256);
    // SAFETY: matches `ls_adam(float* p, const float* g, float* m, float* v, u64 n,
    // float step_size, float inv_sqrt_bc2, float b1, float b2, float eps, float
    // grad_scale)`; the four buffers hold n floats (checked by the caller).
    unsafe { gpu.launch(Kernel::Optim, 0, 0, "ls_adam", dims, &mut a) }
}

pub(crate) fn mask_groups<R: Runtime>(
    gpu: &Gpu<R>,
    values: &mut GpuBuf<R, f32>,
    keep: &GpuBuf<R, u8>,
    rows: usize,
    groups: usize,
    group_len: usize,
) -> Result<(), DeviceError> {
    let total = (rows * groups) as u64;
    if total == 0 || group_len == 0 {
        return Ok(());
    }
    crate::algo::check_u32("mask_groups", "groups", groups)?;
    crate::algo::check_u32("mask_groups", "group length", group_len)?;
    let mut a = KernelArgs::new();
    a.push(values.ptr())
        .push(keep.ptr())
        .push(rows as u64)
        .push(groups as u32)
        .push(group_len as u32);
    // SAFETY: matches `ls_mask_groups(float* values, const unsigned char* keep, u64 rows,
    // u32 groups, u32 group_len)`; the caller checked values ≥ rows·groups·group_len
    // and keep ≥ rows·groups elements.
    unsafe {
        gpu.launch(
            Kernel::Optim,
            0,
            0,
            "ls_mask_groups",
            LaunchDims::cover(total, 256),
            &mut a,
        )
    }
}

/// A plugin op: its kernel, compiled once per source and define set, launched over
/// `items` with the convention of `lsplat_device::op`.
pub(crate) fn plugin_op<R: Runtime>(
    gpu: &Gpu<R>,
    op: &dyn lsplat_device::DeviceOp,
    items: usize,
    args: &mut [lsplat_device::OpArg<'_, GpuBackend<R>>],
) -> Result<(), DeviceError> {
    use lsplat_device::{OpArg, Scalar};
    lsplat_device::op::check_call(op, items, args)?;
    crate::algo::check_u32(op.name(), "items", items)?;
    if args.len() + 1 > crate::runtime::MAX_ARGS {
        return Err(DeviceError::shape(
            op.name(),
            format!(
                "{} arguments (a kernel takes at most {} after `items`)",
                args.len(),
                crate::runtime::MAX_ARGS - 1
            ),
        ));
    }
    let (f, block) = plugin_launchable(gpu, op)?;
    if items == 0 {
        return Ok(());
    }
    let mut a = KernelArgs::new();
    a.push(items as u32);
    for arg in args.iter() {
        match arg {
            OpArg::F32(b) => a.push(b.ptr()),
            OpArg::F32Mut(b) => a.push(b.ptr()),
            OpArg::U32(b) => a.push(b.ptr()),
            OpArg::U32Mut(b) => a.push(b.ptr()),
            OpArg::F64(b) => a.push(b.ptr()),
            OpArg::F64Mut(b) => a.push(b.ptr()),
            OpArg::Scalar(Scalar::F32(v)) => a.push(*v),
            OpArg::Scalar(Scalar::U32(v)) => a.push(*v),
        };
    }
    let n = a.len();
    let mut p = a.pointers();
    let dims = LaunchDims::cover(items as u64, block.max(1));
    // SAFETY: the parameter array follows the plugin-op convention of
    // `lsplat_device::op` (`u32 items`, then each buffer as a device pointer and each
    // scalar by value, in order), which the op's kernel declares; the op's `check`
    // accepted these buffer lengths for `items`, and its kernel stays within what
    // `check` accepts (the op's contract, tested on simt with guarded buffers).
    gpu.timed(op.name(), || unsafe {
        gpu.rt.launch(&f, dims, &mut p[..n])
    })
}

/// The compiled kernel of a plugin op and its block size, looked up by (plugin, op)
/// after the first launch (an op's kernel depends only on its plugin and name:
/// `lsplat_device::DeviceOp::kernel`).
fn plugin_launchable<R: Runtime>(
    gpu: &Gpu<R>,
    op: &dyn lsplat_device::DeviceOp,
) -> Result<(R::Function, u32), DeviceError> {
    let key = (op.plugin(), op.name());
    if let Some(hit) = crate::gpu::lock(&gpu.plugin_fns).get(&key) {
        return Ok(hit.clone());
    }
    let f = plugin_function(gpu, op)?;
    let block = op.kernel().block;
    crate::gpu::lock(&gpu.plugin_fns).insert(key, (f.clone(), block));
    Ok((f, block))
}

/// The compiled kernel of a plugin op (compiled once per source and define set).
pub(crate) fn plugin_function<R: Runtime>(
    gpu: &Gpu<R>,
    op: &dyn lsplat_device::DeviceOp,
) -> Result<R::Function, DeviceError> {
    let k = op.kernel();
    let label = format!("plugin {}, op {} ({})", op.plugin(), op.name(), k.entry);
    let source = lsplat_kernels::plugin_source(&format!("{}.cu", op.plugin()), k.source);
    let mut defines = lsplat_kernels::plugin_defines();
    defines.extend(k.defines.iter().cloned());
    gpu.source_function(&label, &source, &defines, k.entry)
}
