//! Which Gaussians a camera sees, kept as bits: made once per camera from an operator
//! probe (`lv2_vis_bits`), then marked into the step's `vis` (`lv2_vis_or`). Geometry
//! is frozen, so a camera's visible set never changes.

use lsplat_device::{DeviceOp, HostArgs, HostPool, OpKernel, Result};

use super::{BLOCK, PLUGIN, arity, items_are, kernel, need, scalar_is};

/// Bits per word of a visibility mask.
pub const VIS_WORD: usize = u32::BITS as usize;

/// Words of the visibility mask of `gaussians` Gaussians.
pub fn vis_words(gaussians: usize) -> usize {
    gaussians.div_ceil(VIS_WORD)
}

/// Bit g of `bits` (word g / [`VIS_WORD`], bit g mod [`VIS_WORD`]) is set where
/// `probe[g] ≠ 0`; the bits past the last Gaussian are clear. Arguments: `[0]` probe
/// `[N]`, `[1]` bits `[⌈N/32⌉]` (written), `[2]` N (u32 scalar, = `self.gaussians`);
/// items = ⌈N/32⌉.
#[derive(Debug)]
pub struct VisBitsOp {
    /// Gaussians N.
    pub gaussians: usize,
}

impl DeviceOp for VisBitsOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_vis_bits"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_vis_bits", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 3)?;
        items_are(n, items, vis_words(self.gaussians), "⌈gaussians/32⌉")?;
        need(n, "probe", lens[0], self.gaussians, 1)?;
        need(n, "bits", lens[1], items, 1)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, _: &dyn HostPool) -> Result<()> {
        let probe = a.f32(0)?;
        let bits = a.u32_mut(1)?;
        self.check(items, &[probe.len(), bits.len(), 0])?;
        scalar_is(self.name(), "N", a.scalar_u32(2)?, self.gaussians)?;
        let probe = &probe[..self.gaussians];
        for (word, chunk) in bits[..items].iter_mut().zip(probe.chunks(VIS_WORD)) {
            *word = chunk
                .iter()
                .enumerate()
                .filter(|&(_, &v)| v != 0.0)
                .fold(0u32, |w, (b, _)| w | 1 << b);
        }
        Ok(())
    }
}

/// `vis[g] = 1` where bit g of `bits` is set (other entries unchanged). Arguments:
/// `[0]` bits `[⌈N/32⌉]`, `[1]` vis `[N]` (read and written); items = N.
#[derive(Debug)]
pub struct VisOrOp {
    /// Gaussians N.
    pub gaussians: usize,
}

impl DeviceOp for VisOrOp {
    fn plugin(&self) -> &'static str {
        PLUGIN
    }
    fn name(&self) -> &'static str {
        "lv2_vis_or"
    }
    fn kernel(&self) -> OpKernel {
        kernel("lv2_vis_or", BLOCK)
    }
    fn check(&self, items: usize, lens: &[usize]) -> Result<()> {
        let n = self.name();
        arity(n, lens, 2)?;
        items_are(n, items, self.gaussians, "gaussians")?;
        need(n, "bits", lens[0], vis_words(items), 1)?;
        need(n, "vis", lens[1], items, 1)
    }
    fn run_cpu(&self, items: usize, a: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()> {
        let bits = a.u32(0)?;
        let vis = a.f32_mut(1)?;
        self.check(items, &[bits.len(), vis.len()])?;
        pool.for_rows(items, &mut vis[..items], 1, &|_, rows, out| {
            for (g, v) in rows.zip(out.iter_mut()) {
                if bits[g / VIS_WORD] >> (g % VIS_WORD) & 1 == 1 {
                    *v = 1.0;
                }
            }
            0.0
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use lsplat_core::Rng;
    use lsplat_cpu::CpuBackend;
    use lsplat_device::{Backend, OpArg, Scalar};
    use lsplat_gpu::simt::Schedule;

    use super::super::tests_run::simt;
    use super::*;

    /// Bits from a probe, then marked into a `vis` that already holds other marks: the
    /// union, on cpu and on simt (warp 32 and 64) alike, for N not a multiple of 32.
    fn round_trip<B: Backend>(dev: &B) -> (Vec<u32>, Vec<f32>) {
        const N: usize = 1001;
        let mut rng = Rng::new(7);
        let probe: Vec<f32> = (0..N)
            .map(|g| match g % 5 {
                0 => 0.0,
                1 => -0.0,
                _ => rng.f32() * f32::from(rng.f32() < 0.5),
            })
            .collect();
        let before: Vec<f32> = (0..N).map(|g| f32::from(g % 7 == 3)).collect();
        let words = vis_words(N);
        let (probe_buf, mut bits) = (
            dev.upload(&probe).unwrap(),
            dev.alloc::<u32>(words).unwrap(),
        );
        let mut vis = dev.upload(&before).unwrap();
        dev.run_op(
            &VisBitsOp { gaussians: N },
            words,
            &mut [
                OpArg::F32(&probe_buf),
                OpArg::U32Mut(&mut bits),
                OpArg::Scalar(Scalar::U32(N as u32)),
            ],
        )
        .unwrap();
        dev.run_op(
            &VisOrOp { gaussians: N },
            N,
            &mut [OpArg::U32(&bits), OpArg::F32Mut(&mut vis)],
        )
        .unwrap();
        let (bits, vis) = (dev.download(&bits).unwrap(), dev.download(&vis).unwrap());
        for g in 0..N {
            let seen = probe[g] != 0.0;
            assert_eq!(bits[g / 32] >> (g % 32) & 1 == 1, seen, "bit {g}");
            let want = if seen { 1.0 } else { before[g] };
            assert_eq!(vis[g], want, "vis {g}");
        }
        assert_eq!(bits[words - 1] >> (N % 32), 0, "bits past N stay clear");
        (bits, vis)
    }

    #[test]
    fn visible_sets_round_trip_on_cpu_and_simt() {
        let cpu = round_trip(&CpuBackend::new(2));
        for (warp, schedule) in [(32, Schedule::InOrder), (64, Schedule::Random)] {
            let Some(dev) = simt(warp, schedule) else {
                continue;
            };
            assert_eq!(round_trip(&dev), cpu, "warp {warp}");
        }
        #[cfg(feature = "cuda")]
        if let Some(dev) = crate::ops::tests_run::cuda() {
            assert_eq!(round_trip(&dev), cpu, "cuda");
        }
    }
}
