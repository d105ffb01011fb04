//! The plugin's two device ops, each a kernel plus a native CPU implementation.

use lsplat_core::constants::COS_EPS;
use lsplat_device::op::check_rows;
use lsplat_device::{DeviceError, DeviceOp, HostArgs, HostPool, OpKernel, Result};

use crate::PLUGIN;

const SOURCE: &str = include_str!("../kernels/robust_cosine.cu");

/// Every op of the plugin (sizes are placeholders: for compiling their kernels).
pub fn all() -> Vec<Box<dyn DeviceOp>> {
    vec![
        Box::new(PixelsOp {
            rows: 0,
            channels: 0,
        }),
        Box::new(SumOp),
    ]
}

/// Threads of the single block that sums the per-pixel losses (`RC_SUM_THREADS`).
pub const SUM_THREADS: usize = 256;

fn kernel(entry: &'static str, block: u32) -> OpKernel {
    OpKernel {
        source: SOURCE,
        entry,
        block,
        defines: vec![("RC_SUM_THREADS".into(), format!("{SUM_THREADS}u"))],
    }
}

fn need(op: &'static str, what: &str, got: usize, needed: usize) -> Result<()> {
    lsplat_device::check::at_least(op, what, got, needed)
}

/// ρ(r) = s·ln(1 + r/s) of one pixel; writes `d = grad_scale·ρ'(r)·∂r/∂f`.
/// The same operations in the same order as the kernel.
pub fn robust_row(f: &[f32], g: &[f32], s: f32, grad_scale: f32, d: &mut [f32]) -> f32 {
    let nf2: f32 = f.iter().fold(0.0, |a, v| a + v * v);
    let ng2: f32 = g.iter().fold(0.0, |a, v| a + v * v);
    let dot: f32 = f.iter().zip(g).fold(0.0, |a, (x, y)| a + x * y);
    let (nf, ng) = (nf2.sqrt(), ng2.sqrt());
    let denom = (nf * ng).max(COS_EPS);
    let cos = dot / denom;
    let q = 1.0 + (1.0 - cos) / s;
    let k = grad_scale / q;
    let full = nf * ng > COS_EPS;
    for ((dv, fv), gv) in d.iter_mut().zip(f).zip(g) {
        let gr = if full {
            -(gv / denom - cos * fv / (nf * nf))
        } else {
            -gv / denom
        };
        *dv = k * gr;
    }
    s * q.ln()
}

/// Per valid pixel: ρ and its gradient. Arguments: `rendered [v·c]`, `mask [v]`,
/// `table [rows·c]`, `d_rendered [v·c]` (written), `rho [v]` (written), `c`,
/// `grad_scale`, `s`.
#[derive(Debug)]
pub struct PixelsOp {
    /// Rows of the table (every mask entry is below it: `GroundTruth`'s contract).
    pub rows: usize,
    /// Channels C (the `c` argument).
    pub channels: usize,
}

impl DeviceOp for PixelsOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "robust_cosine_pixels"
    }
    fn kernel(&self) -> OpKernel {
        kernel("robust_cosine_pixels", 256)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        if lens.len() != 8 {
            return Err(DeviceError::shape(
                n,
                format!("{} arguments, 8 expected", lens.len()),
            ));
        }
        let c = self.channels;
        need(n, "rendered", lens[0], items * c)?;
        need(n, "mask", lens[1], items)?;
        need(n, "table", lens[2], self.rows * c)?;
        need(n, "d_rendered", lens[3], items * c)?;
        need(n, "rho", lens[4], items)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let (f, mask, table) = (a.f32(0)?, a.u32(1)?, a.f32(2)?);
        let d = a.f32_mut(3)?;
        let rho = a.f32_mut(4)?;
        let c = a.scalar_u32(5)? as usize;
        let (grad_scale, s) = (a.scalar_f32(6)?, a.scalar_f32(7)?);
        let n = self.name();
        if c != self.channels {
            return Err(DeviceError::shape(
                n,
                format!("c = {c}, the op was made for {}", self.channels),
            ));
        }
        if let Some(bad) = mask[..items].iter().find(|&&m| m as usize >= self.rows) {
            return Err(DeviceError::shape(
                n,
                format!("mask row {bad} ≥ {} table rows", self.rows),
            ));
        }
        check_rows(n, d.len(), items, c)?;
        // ρ goes to the rows' own range of `rho`, copied in chunks through the stack.
        const CHUNK: usize = 64;
        let rho = std::sync::Mutex::new(&mut rho[..items]);
        pool.for_rows(items, &mut d[..items * c], c, &|_, rows, d| {
            let mut local = [0.0f32; CHUNK];
            for start in rows.clone().step_by(CHUNK) {
                let end = (start + CHUNK).min(rows.end);
                for p in start..end {
                    let (m, k) = (mask[p] as usize, p - rows.start);
                    local[p - start] = robust_row(
                        &f[p * c..p * c + c],
                        &table[m * c..m * c + c],
                        s,
                        grad_scale,
                        &mut d[k * c..k * c + c],
                    );
                }
                let mut r = rho.lock().unwrap_or_else(|e| e.into_inner());
                r[start..end].copy_from_slice(&local[..end - start]);
            }
            0.0
        });
        Ok(())
    }
}

/// `loss[slot] (+)= scale · Σ rho[..n]` in the kernel's fixed order. Arguments:
/// `rho`, `loss` (written), `n`, `slot`, `scale`, `accumulate` (0/1).
#[derive(Debug)]
pub struct SumOp;

impl DeviceOp for SumOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "robust_cosine_sum"
    }
    fn kernel(&self) -> OpKernel {
        kernel("robust_cosine_sum", SUM_THREADS as u32)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        if items != SUM_THREADS || lens.len() != 6 {
            return Err(DeviceError::shape(
                self.name(),
                format!("runs as one block of {SUM_THREADS} items with 6 arguments"),
            ));
        }
        Ok(())
    }
    fn run_cpu(&self, _items: usize, a: &mut HostArgs<'_>, _pool: &dyn HostPool) -> Result<()> {
        let rho = a.f32(0)?;
        let loss = a.f32_mut(1)?;
        let (n, slot) = (a.scalar_u32(2)? as usize, a.scalar_u32(3)? as usize);
        let (scale, accumulate) = (a.scalar_f32(4)?, a.scalar_u32(5)? != 0);
        need(self.name(), "rho", rho.len(), n)?;
        need(self.name(), "loss", loss.len(), slot + 1)?;
        let mut part = [0.0f64; SUM_THREADS];
        for (t, p) in part.iter_mut().enumerate() {
            *p = rho[..n]
                .iter()
                .skip(t)
                .step_by(SUM_THREADS)
                .fold(0.0, |a, &v| a + v as f64);
        }
        let mut w = SUM_THREADS / 2;
        while w > 0 {
            for t in 0..w {
                part[t] += part[t + w];
            }
            w /= 2;
        }
        let v = (part[0] * scale as f64) as f32;
        loss[slot] = if accumulate { loss[slot] + v } else { v };
        Ok(())
    }
}
