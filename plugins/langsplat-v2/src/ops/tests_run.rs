//! The harness of the op tests: random inputs, every op run on a backend, and the
//! simt runtime (skipped unless present or LSPLAT_REQUIRE_SIMT=1).

use lsplat_core::Rng;
use lsplat_device::{Backend, OpArg, Scalar};
use lsplat_gpu::SimtBackend;
use lsplat_gpu::simt::{Schedule, Simt, SimtOptions};

use super::*;

pub(super) const N: usize = 300;
pub(super) const ROWS: usize = 7;
pub(super) const DIM: usize = 48;
pub(super) const V: usize = 500;
pub(super) const ZERO_ROW: usize = 3;

pub(super) struct Inputs {
    pub logits: Vec<f32>,
    pub d_dense: Vec<f32>,
    pub codebook: Vec<f32>,
    pub table: Vec<f32>,
    pub w: Vec<f32>,
    pub mask: Vec<u32>,
    pub d_codebook: Vec<f32>,
    pub grad_scale: f32,
}

/// Random inputs: ties and NaNs in the first logit rows, pixels p % 23 == 7 with
/// all-zero weights, table row [`ZERO_ROW`] zero (and some pixels on it).
pub(super) fn inputs(seed: u64) -> Inputs {
    let mut rng = Rng::new(seed);
    let mut logits: Vec<f32> = (0..N * CODES).map(|_| 2.0 * rng.normal()).collect();
    logits[..2 * CODES].fill(0.5);
    (logits[CODES], logits[CODES + 5]) = (f32::NAN, f32::NAN);
    (logits[2 * CODES + 10], logits[2 * CODES + 20]) = (9.0, 9.0);
    let mut table: Vec<f32> = (0..ROWS * DIM).map(|_| rng.normal()).collect();
    table[ZERO_ROW * DIM..][..DIM].fill(0.0);
    let mut w = vec![0.0; V * CODES];
    for p in (0..V).filter(|p| p % 23 != 7) {
        for c in 0..CODES {
            if rng.f32() < 0.3 {
                w[p * CODES + c] = rng.f32();
            }
        }
    }
    let mut mask: Vec<u32> = (0..V).map(|_| rng.below(ROWS as u64) as u32).collect();
    (mask[1], mask[2]) = (ZERO_ROW as u32, ZERO_ROW as u32);
    Inputs {
        d_dense: (0..N * CODES).map(|_| rng.normal()).collect(),
        codebook: (0..CODES * DIM).map(|_| rng.normal()).collect(),
        d_codebook: (0..CODES * DIM).map(|_| 0.01 * rng.normal()).collect(),
        logits,
        table,
        w,
        mask,
        grad_scale: 0.8 / (20.0 * 30.0),
    }
}

/// Every output of [`run_all`].
#[derive(Debug, PartialEq)]
pub(super) struct Outputs {
    pub idx: Vec<u32>,
    pub val: Vec<f32>,
    pub dense: Vec<f32>,
    pub d_logits: Vec<f32>,
    pub bg: Vec<f32>,
    pub gram: Vec<f32>,
    pub gnorm: Vec<f32>,
    pub d_w: Vec<f32>,
    pub rho: Vec<f32>,
    pub coef: Vec<f32>,
    pub u: Vec<f32>,
    pub s: Vec<f32>,
    pub d_codebook: Vec<f32>,
    /// loss slot 1 after storing, then after adding once more.
    pub loss: [f32; 2],
}

impl Outputs {
    /// The float buffers by name (idx apart), as bits.
    pub fn bits(&self) -> Vec<(&'static str, Vec<u32>)> {
        self.floats()
            .into_iter()
            .map(|(n, v)| (n, v.iter().map(|x| x.to_bits()).collect()))
            .collect()
    }

    pub fn floats(&self) -> Vec<(&'static str, &[f32])> {
        vec![
            ("val", &self.val[..]),
            ("dense", &self.dense),
            ("d_logits", &self.d_logits),
            ("bg", &self.bg),
            ("gram", &self.gram),
            ("gnorm", &self.gnorm),
            ("d_w", &self.d_w),
            ("rho", &self.rho),
            ("coef", &self.coef),
            ("u", &self.u),
            ("s", &self.s),
            ("d_codebook", &self.d_codebook),
            ("loss", &self.loss),
        ]
    }
}

/// Runs every op on `dev`: TopK, TopKBackward, then Prep → Cosine → Acc →
/// CodebookGrad → Sum on `inp.w`. Outputs start as NaN (u32::MAX) to catch entries
/// that are never written.
pub(super) fn run_all<B: Backend>(dev: &B, inp: &Inputs) -> Outputs {
    let up = |x: &[f32]| dev.upload(x).unwrap();
    let junk = |n: usize| dev.upload(&vec![f32::NAN; n]).unwrap();
    let get = |b: &B::Buf<f32>| dev.download(b).unwrap();
    let (logits, d_dense) = (up(&inp.logits), up(&inp.d_dense));
    let mut idx = dev.upload(&vec![u32::MAX; N * TOP_K]).unwrap();
    let (mut val, mut dense, mut d_logits) = (junk(N * TOP_K), junk(N * CODES), junk(N * CODES));
    let topk = TopKOp { gaussians: N };
    let args = &mut [
        OpArg::F32(&logits),
        OpArg::U32Mut(&mut idx),
        OpArg::F32Mut(&mut val),
        OpArg::F32Mut(&mut dense),
    ];
    dev.run_op(&topk, N, args).unwrap();
    let back = TopKBackwardOp { gaussians: N };
    let args = &mut [
        OpArg::U32(&idx),
        OpArg::F32(&val),
        OpArg::F32(&d_dense),
        OpArg::F32Mut(&mut d_logits),
    ];
    dev.run_op(&back, N, args).unwrap();

    let (codebook, table, w) = (up(&inp.codebook), up(&inp.table), up(&inp.w));
    let mask = dev.upload(&inp.mask).unwrap();
    let (mut bg, mut gram, mut gnorm) = (junk(ROWS * CODES), junk(CODES * CODES), junk(ROWS));
    let prep = PrepOp {
        rows: ROWS,
        dim: DIM,
    };
    let args = &mut [
        OpArg::F32(&codebook),
        OpArg::F32(&table),
        OpArg::F32Mut(&mut bg),
        OpArg::F32Mut(&mut gram),
        OpArg::F32Mut(&mut gnorm),
        OpArg::Scalar(Scalar::U32(DIM as u32)),
    ];
    dev.run_op(&prep, prep.items(), args).unwrap();
    let (mut d_w, mut rho, mut coef) = (junk(V * CODES), junk(V), junk(2 * V));
    let cosine = CosineOp {
        rows: ROWS,
        pixels: V,
    };
    let args = &mut [
        OpArg::F32(&w),
        OpArg::U32(&mask),
        OpArg::F32(&bg),
        OpArg::F32(&gram),
        OpArg::F32(&gnorm),
        OpArg::F32Mut(&mut d_w),
        OpArg::F32Mut(&mut rho),
        OpArg::F32Mut(&mut coef),
        OpArg::Scalar(Scalar::F32(inp.grad_scale)),
    ];
    dev.run_op(&cosine, V, args).unwrap();
    let (mut u, mut s) = (junk(ROWS * CODES), junk(CODES * CODES));
    let acc = AccOp {
        rows: ROWS,
        pixels: V,
    };
    let mut part = junk(AccOp::part_len(ROWS));
    let mut count = dev.upload(&[0u32]).unwrap();
    let args = &mut [
        OpArg::F32(&w),
        OpArg::U32(&mask),
        OpArg::F32(&coef),
        OpArg::F32Mut(&mut u),
        OpArg::F32Mut(&mut s),
        OpArg::F32Mut(&mut part),
        OpArg::U32Mut(&mut count),
        OpArg::Scalar(Scalar::U32(V as u32)),
        OpArg::Scalar(Scalar::U32(ROWS as u32)),
    ];
    dev.run_op(&acc, acc.items(), args).unwrap();
    assert_eq!(
        dev.download(&count).unwrap(),
        [0],
        "lv2_acc resets its counter"
    );
    let mut d_codebook = up(&inp.d_codebook);
    let grad = CodebookGradOp {
        rows: ROWS,
        dim: DIM,
    };
    let args = &mut [
        OpArg::F32(&u),
        OpArg::F32(&s),
        OpArg::F32(&table),
        OpArg::F32(&codebook),
        OpArg::F32Mut(&mut d_codebook),
        OpArg::Scalar(Scalar::U32(ROWS as u32)),
    ];
    dev.run_op(&grad, CODES * DIM, args).unwrap();
    let mut loss = junk(3);
    let mut sum = |accumulate: u32| {
        let args = &mut [
            OpArg::F32(&rho),
            OpArg::F32Mut(&mut loss),
            OpArg::Scalar(Scalar::U32(V as u32)),
            OpArg::Scalar(Scalar::U32(1)),
            OpArg::Scalar(Scalar::F32(inp.grad_scale)),
            OpArg::Scalar(Scalar::U32(accumulate)),
        ];
        dev.run_op(&SumOp, SUM_THREADS, args).unwrap();
        dev.download(&loss).unwrap()[1]
    };
    let loss = [sum(0), sum(1)];
    Outputs {
        idx: dev.download(&idx).unwrap(),
        val: get(&val),
        dense: get(&dense),
        d_logits: get(&d_logits),
        bg: get(&bg),
        gram: get(&gram),
        gnorm: get(&gnorm),
        d_w: get(&d_w),
        rho: get(&rho),
        coef: get(&coef),
        u: get(&u),
        s: get(&s),
        d_codebook: get(&d_codebook),
        loss,
    }
}

pub(super) fn simt(warp: u32, schedule: Schedule) -> Option<SimtBackend> {
    let options = SimtOptions {
        warp,
        schedule,
        seed: 7,
        threads: 2,
    };
    opened(Simt::new(options), "LSPLAT_REQUIRE_SIMT", "simt runtime")
}

/// The CUDA device (with the `cuda` feature), or `None` (skipped, with a message)
/// unless `LSPLAT_REQUIRE_CUDA=1`.
#[cfg(feature = "cuda")]
pub(super) fn cuda() -> Option<lsplat_gpu::CudaBackend> {
    let rt = lsplat_gpu::cuda::Cuda::new(0, Default::default());
    opened(rt, "LSPLAT_REQUIRE_CUDA", "CUDA device")
}

/// A backend over `rt`, or `None` with a SKIPPED line — a failure when `var` is 1.
fn opened<R: lsplat_gpu::Runtime>(
    rt: lsplat_device::Result<R>,
    var: &str,
    what: &str,
) -> Option<lsplat_gpu::GpuBackend<R>> {
    match rt {
        Ok(rt) => Some(lsplat_gpu::GpuBackend::new(rt)),
        Err(e) => {
            let required = std::env::var(var).is_ok_and(|v| v == "1");
            assert!(!required, "{var}=1 but: {e}");
            eprintln!("SKIPPED (no {what}): {e}");
            None
        }
    }
}
