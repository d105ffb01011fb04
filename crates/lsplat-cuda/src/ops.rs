//! Per-element ops: losses, V1 normalisation and its backward, fused Adam.

use cudarc::driver::PushKernelArg;
use lsplat_core::config::LossKind;
use lsplat_device::{AdamParams, DeviceError, GroundTruth};
use lsplat_kernels::Kernel;

use crate::CudaBackend;
use crate::buf::{CudaBuf, alloc};
use crate::gpu::{Gpu, drv, grid};

const LOSS_THREADS: u32 = 256; // LS_LOSS_THREADS in loss.cu

pub(crate) fn pixel_loss(
    gpu: &Gpu,
    kind: LossKind,
    rendered: &CudaBuf<f32>,
    gt: &GroundTruth<CudaBackend>,
    weight: f32,
    d_rendered: &mut CudaBuf<f32>,
    loss: &mut CudaBuf<f32>,
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
    let partials = alloc::<f64>(gpu, 2 * blocks)?;
    if v > 0 {
        let f = gpu.function(Kernel::Loss, 0, 0, "ls_pixel_loss")?;
        let (v32, c32) = (v as u32, c as u32);
        let mut l = gpu.stream.launch_builder(&f);
        l.arg(&k)
            .arg(&rendered.raw)
            .arg(&gt.mask.raw)
            .arg(&gt.table.raw)
            .arg(&v32)
            .arg(&c32)
            .arg(&l1_grad)
            .arg(&cos_grad)
            .arg(&d_rendered.raw)
            .arg(&partials.raw);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (LOSS_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches `ls_pixel_loss(int kind, const float* f, const u32* mask,
        // const float* table, u32 v, u32 c, float l1_grad, float cos_grad, float* d,
        // double* partials)`; shapes checked by the caller (rendered, d: v·C; mask: v;
        // partials: 2 per block; mask rows < table rows by GroundTruth's contract).
        unsafe { l.launch(cfg) }.map_err(drv)?;
    }
    let f = gpu.function(Kernel::Loss, 0, 0, "ls_loss_finish")?;
    let (b32, s32, acc, w64) = (blocks as u32, slot as u32, accumulate as i32, weight as f64);
    let mut l = gpu.stream.launch_builder(&f);
    let l1s = if k == 1 { 0.0 } else { l1_scale };
    let coss = if k == 0 { 0.0 } else { cos_scale };
    l.arg(&partials.raw)
        .arg(&b32)
        .arg(&l1s)
        .arg(&coss)
        .arg(&w64)
        .arg(&loss.raw)
        .arg(&s32)
        .arg(&acc);
    // SAFETY: matches `ls_loss_finish(const double* partials, u32 blocks, double
    // l1_scale, double cos_scale, double weight, float* loss, u32 slot, int
    // accumulate)`; slot < loss.len() was checked by the caller.
    unsafe { l.launch(grid(1, LOSS_THREADS)) }.map_err(drv)?;
    Ok(())
}

pub(crate) fn normalize(
    gpu: &Gpu,
    x: &CudaBuf<f32>,
    channels: usize,
    out: &mut CudaBuf<f32>,
) -> Result<(), DeviceError> {
    let rows = x.len() / channels;
    if rows == 0 {
        return Ok(());
    }
    let f = gpu.function(Kernel::Optim, 0, 0, "ls_normalize")?;
    let (r32, c32) = (rows as u32, channels as u32);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&x.raw).arg(&r32).arg(&c32).arg(&out.raw);
    // SAFETY: matches `ls_normalize(const float* x, u32 rows, u32 c, float* out)`;
    // x and out hold rows·c floats.
    unsafe { l.launch(grid(rows as u64, 256)) }.map_err(drv)?;
    Ok(())
}

pub(crate) fn normalize_backward(
    gpu: &Gpu,
    x: &CudaBuf<f32>,
    d_out: &CudaBuf<f32>,
    channels: usize,
    d_x: &mut CudaBuf<f32>,
) -> Result<(), DeviceError> {
    let rows = x.len() / channels;
    if rows == 0 {
        return Ok(());
    }
    let f = gpu.function(Kernel::Optim, 0, 0, "ls_normalize_backward")?;
    let (r32, c32) = (rows as u32, channels as u32);
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&x.raw)
        .arg(&d_out.raw)
        .arg(&r32)
        .arg(&c32)
        .arg(&d_x.raw);
    // SAFETY: matches `ls_normalize_backward(const float* x, const float* d, u32 rows,
    // u32 c, float* d_x)`; all hold rows·c floats.
    unsafe { l.launch(grid(rows as u64, 256)) }.map_err(drv)?;
    Ok(())
}

pub(crate) fn adam(
    gpu: &Gpu,
    p: &mut CudaBuf<f32>,
    g: &CudaBuf<f32>,
    m: &mut CudaBuf<f32>,
    v: &mut CudaBuf<f32>,
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
    let f = gpu.function(Kernel::Optim, 0, 0, "ls_adam")?;
    let mut l = gpu.stream.launch_builder(&f);
    l.arg(&p.raw)
        .arg(&g.raw)
        .arg(&m.raw)
        .arg(&v.raw)
        .arg(&n)
        .arg(&step_size)
        .arg(&inv_sqrt_bc2)
        .arg(&hp.beta1)
        .arg(&hp.beta2)
        .arg(&hp.eps)
        .arg(&hp.grad_scale);
    // SAFETY: matches `ls_adam(float* p, const float* g, float* m, float* v, u64 n,
    // float step_size, float inv_sqrt_bc2, float b1, float b2, float eps, float
    // grad_scale)`; the four buffers hold n floats (checked by the caller).
    unsafe { l.launch(grid(n, 256)) }.map_err(drv)?;
    Ok(())
}
