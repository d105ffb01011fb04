//! The compact and recompute layouts and spilled operators against the exact
//! in-memory operator.

use lsplat_core::Rng;
use lsplat_core::config::{LossKind, WeightPrecision};
use lsplat_device::Backend;

use crate::CpuBackend;
use crate::operator::CpuOperator;
use crate::operator::fused_loss_step;
use crate::optim::LossScales;
use crate::testing::operator_of;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The fused step over `a` and over `b` (the same shape) gives the same sums and bits,
/// with `groups` random mask features.
#[allow(clippy::too_many_arguments)]
fn assert_same_fused_step(
    dev: &CpuBackend,
    a: &CpuOperator,
    b: &CpuOperator,
    x: &[f32],
    c: usize,
    groups: u32,
    rng: &mut Rng,
    what: &str,
) {
    let n = a.cols();
    let mask: Vec<u32> = (0..a.rows() as u32).map(|r| r % groups).collect();
    let table: Vec<f32> = (0..groups as usize * c)
        .map(|_| rng.range(-1.0, 1.0))
        .collect();
    let scales = LossScales::new(LossKind::L1Cosine, c, a.rows(), 1.0);
    let (mut ga, mut gb) = (vec![0.0; n * c], vec![0.0; n * c]);
    let (w, p) = (dev.workers(), &dev.products);
    let sa = fused_loss_step(w, p, a, x, &mask, &table, c, &scales, &mut ga);
    let sb = fused_loss_step(w, p, b, x, &mask, &table, c, &scales, &mut gb);
    assert_eq!(sa, sb, "{what}: the fused step's sums");
    assert_eq!(bits(&ga), bits(&gb), "{what}: the fused step");
}

/// `|got − want| ≤ rel·scale` element by element.
fn within(what: &str, got: &[f32], want: &[f32], scale: &[f64], rel: f64) {
    for (i, ((&a, &b), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        assert!(
            (a as f64 - b as f64).abs() <= rel * s + 1e-6 * rel * s.max(1e-30),
            "{what}[{i}]: {a} vs {b} (scale {s})"
        );
    }
}

/// The compact operator holds the exact operator's entries, in the same order, with
/// weights within 2⁻¹² relative, in at most 3 bytes per entry (plus the lists), and
/// its products stay within the bound that gives: `|W̃x − Wx| ≤ 2⁻¹²·Σ|w|·|x|` per
/// output (f32 rounding of the sums adds ~1e-6 relative).
#[test]
fn the_compact_layout_keeps_every_entry_within_its_error_bound() {
    let dev = CpuBackend::new(2);
    for (seed, n, size) in [(3, 3000, (150, 100)), (4, 20_000, (320, 240))] {
        let mut r1 = Rng::new(seed);
        let mut r2 = Rng::new(seed);
        let exact = operator_of(&dev, &mut r1, n, size, WeightPrecision::F32);
        let compact = operator_of(&dev, &mut r2, n, size, WeightPrecision::Compact);
        assert_eq!(exact.rows(), compact.rows());
        assert_eq!(exact.nnz(), compact.nnz(), "same non-zeros");
        assert!(exact.nnz() > 10_000);
        for r in 0..exact.rows() {
            let (a, b) = (exact.row(r), compact.row(r));
            assert_eq!(a.len(), b.len(), "row {r}");
            for (&(ga, wa), &(gb, wb)) in a.iter().zip(&b) {
                assert_eq!(ga, gb, "row {r}: same Gaussians in the same order");
                assert!(
                    ((wb - wa) / wa).abs() <= 2f32.powi(-12),
                    "row {r}: {wa} vs {wb}"
                );
            }
        }
        let entry_bytes = |op: &CpuOperator| op.entry_bytes() as f64 / op.nnz() as f64;
        assert_eq!(entry_bytes(&exact), 6.0, "{}", entry_bytes(&exact));
        assert!(entry_bytes(&compact) <= 3.05, "{}", entry_bytes(&compact));
        let c = 3;
        let mut rng = Rng::new(seed + 10);
        let x: Vec<f32> = (0..n * c).map(|_| rng.range(-1.0, 1.0)).collect();
        let (mut fe, mut fc) = (vec![0.0; exact.rows() * c], vec![0.0; exact.rows() * c]);
        dev.spmm(&exact, &x, c, &mut fe).unwrap();
        dev.spmm(&compact, &x, c, &mut fc).unwrap();
        let scale: Vec<f64> = (0..exact.rows() * c)
            .map(|i| {
                exact
                    .row(i / c)
                    .iter()
                    .map(|&(g, w)| (w * x[g as usize * c + i % c].abs()) as f64)
                    .sum()
            })
            .collect();
        within("W·x", &fc, &fe, &scale, 2f64.powi(-12) + 2e-6);
        let d: Vec<f32> = (0..exact.rows() * c)
            .map(|_| rng.range(-1.0, 1.0))
            .collect();
        let (mut de, mut dc) = (vec![0.0; n * c], vec![0.0; n * c]);
        dev.spmm_t(&exact, &d, c, &mut de).unwrap();
        dev.spmm_t(&compact, &d, c, &mut dc).unwrap();
        let mut tscale = vec![0f64; n * c];
        for r in 0..exact.rows() {
            for (g, w) in exact.row(r) {
                for k in 0..c {
                    tscale[g as usize * c + k] += (w * d[r * c + k].abs()) as f64;
                }
            }
        }
        within("Wᵀ·d", &dc, &de, &tscale, 2f64.powi(-12) + 2e-6);
    }
}

/// The `recompute` operator stores one byte per entry and no weights, yet its rows and
/// every product (`W·x`, `Wᵀ·d`, the fused step, the sparse-input products) are bitwise
/// those of the f32 operator, on any number of workers.
#[test]
fn the_recompute_layout_is_bitwise_the_exact_operator() {
    for (seed, n, size, threads) in [
        (3, 3000, (150, 100), 1),
        (4, 20_000, (320, 240), 2),
        (6, 60_000, (400, 300), 3),
    ] {
        let dev = CpuBackend::new(threads);
        let exact = operator_of(&dev, &mut Rng::new(seed), n, size, WeightPrecision::F32);
        let op = operator_of(
            &dev,
            &mut Rng::new(seed),
            n,
            size,
            WeightPrecision::Recompute,
        );
        assert!(exact.nnz() > 10_000);
        assert_eq!((op.rows(), op.nnz()), (exact.rows(), exact.nnz()));
        let (pe, ce, we) = exact.to_csr();
        let (pr, cr, wr) = op.to_csr();
        assert_eq!((pe, ce), (pr, cr), "same sparsity");
        assert_eq!(bits(&we), bits(&wr), "same weights");
        for r in (0..op.rows()).step_by(37) {
            assert_eq!(exact.row(r), op.row(r), "row {r}");
        }
        // One byte per entry (fillers are rare), against f32's six.
        assert_eq!(op.entry_bytes(), op.entries());
        assert!(op.entries() as f64 <= 1.02 * op.nnz() as f64);
        assert!(
            3 * op.bytes() <= exact.bytes(),
            "{} vs {} bytes",
            op.bytes(),
            exact.bytes()
        );
        let c = 3;
        let mut rng = Rng::new(seed + 10);
        let x: Vec<f32> = (0..n * c).map(|_| rng.range(-1.0, 1.0)).collect();
        let (mut fe, mut fr) = (vec![0.0; op.rows() * c], vec![0.0; op.rows() * c]);
        dev.spmm(&exact, &x, c, &mut fe).unwrap();
        dev.spmm(&op, &x, c, &mut fr).unwrap();
        assert_eq!(bits(&fe), bits(&fr), "W·x");
        let d: Vec<f32> = (0..op.rows() * c).map(|_| rng.range(-1.0, 1.0)).collect();
        let (mut de, mut dr) = (vec![0.25; n * c], vec![0.25; n * c]);
        dev.spmm_t(&exact, &d, c, &mut de).unwrap();
        dev.spmm_t(&op, &d, c, &mut dr).unwrap();
        assert_eq!(bits(&de), bits(&dr), "Wᵀ·d");
        assert_same_fused_step(&dev, &exact, &op, &x, c, 7, &mut rng, "recompute");
        // k-sparse inputs: k = 4 columns of 16 per Gaussian.
        let (k, cs) = (4, 16);
        let idx: Vec<u32> = (0..n * k).map(|i| ((i * 5 + i / k) % cs) as u32).collect();
        let val: Vec<f32> = (0..n * k).map(|_| rng.range(-1.0, 1.0)).collect();
        let (mut ye, mut yr) = (vec![0.0; op.rows() * cs], vec![0.0; op.rows() * cs]);
        dev.spmm_sparse(&exact, &idx, &val, k, cs, &mut ye).unwrap();
        dev.spmm_sparse(&op, &idx, &val, k, cs, &mut yr).unwrap();
        assert_eq!(bits(&ye), bits(&yr), "sparse W·x");
        let (mut ve, mut vr) = (vec![0.0; n * k], vec![0.0; n * k]);
        dev.spmm_t_sparse(&exact, &idx, &ye, k, cs, &mut ve)
            .unwrap();
        dev.spmm_t_sparse(&op, &idx, &ye, k, cs, &mut vr).unwrap();
        assert_eq!(bits(&ve), bits(&vr), "sparse Wᵀ·d");
    }
}

/// A `recompute` operator needs the geometry and camera of its projection: a
/// projection without them (not made by `project`) is refused with a clear error.
#[test]
fn a_recompute_operator_needs_its_projection_source() {
    use lsplat_core::TileGrid;
    use lsplat_device::PixelSet;
    let dev = CpuBackend::new(1);
    let grid = TileGrid::new(16, 32, 32);
    let proj = crate::project::CpuProjection::default();
    let mut bins = Default::default();
    dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
    let (px, off) = grid.select_pixels(|_| true);
    let set = PixelSet::upload(&dev, grid, &px, &off).unwrap();
    let err = dev
        .build_operator(&proj, &bins, &set, 0, WeightPrecision::Recompute)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("needs a projection made by `project`"),
        "{err}"
    );
    dev.build_operator(&proj, &bins, &set, 0, WeightPrecision::F32)
        .unwrap();
}

/// A spilled operator (written to a file, mapped, the file unlinked) gives bitwise
/// the products of the operator it was spilled from, in every layout, holds almost
/// nothing in memory, and leaves no file behind.
#[test]
fn a_spilled_operator_gives_the_same_bits() {
    let dev = CpuBackend::new(2);
    let dir = tempfile_dir();
    for p in [
        WeightPrecision::F32,
        WeightPrecision::Bf16,
        WeightPrecision::Compact,
        WeightPrecision::Recompute,
    ] {
        let mut rng = Rng::new(9);
        let n = 4000;
        let op = operator_of(&dev, &mut rng, n, (200, 120), p);
        let spilled = op.spill(&dir, "test", p == WeightPrecision::F32).unwrap().0;
        assert!(spilled.is_spilled() && !op.is_spilled());
        assert_eq!(spilled.bytes(), op.bytes());
        assert!(spilled.resident_bytes() * 50 < op.resident_bytes());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "the spill file is unlinked"
        );
        let c = 4;
        let x: Vec<f32> = (0..n * c).map(|_| rng.range(-1.0, 1.0)).collect();
        let (mut a, mut b) = (vec![0.0; op.rows() * c], vec![0.0; op.rows() * c]);
        dev.spmm(&op, &x, c, &mut a).unwrap();
        dev.spmm(&spilled, &x, c, &mut b).unwrap();
        assert_eq!(bits(&a), bits(&b), "{p:?}: W·x");
        let (mut da, mut db) = (vec![0.5; n * c], vec![0.5; n * c]);
        dev.spmm_t(&op, &a, c, &mut da).unwrap();
        dev.spmm_t(&spilled, &a, c, &mut db).unwrap();
        assert_eq!(bits(&da), bits(&db), "{p:?}: Wᵀ·d");
        // Twice: the pages released after the first product read back the same.
        dev.spmm_t(&spilled, &a, c, &mut db).unwrap();
        dev.spmm_t(&op, &a, c, &mut da).unwrap();
        assert_eq!(bits(&da), bits(&db), "{p:?}: Wᵀ·d after a release");
        for r in (0..op.rows()).step_by(97) {
            assert_eq!(op.row(r), spilled.row(r));
        }
        assert_same_fused_step(&dev, &op, &spilled, &x, c, 5, &mut rng, &format!("{p:?}"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh empty directory under the system's temporary folder.
fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "lsplat-cpu-spill-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `to_csr` (the SciPy export) of the compact operator leaves its fillers out: the
/// same row offsets and Gaussians as the exact operator's, weights within 2⁻¹².
#[test]
fn the_compact_operator_exports_the_exact_sparsity() {
    let dev = CpuBackend::new(2);
    let size = (320, 240);
    let exact = operator_of(&dev, &mut Rng::new(5), 20_000, size, WeightPrecision::F32);
    let compact = operator_of(
        &dev,
        &mut Rng::new(5),
        20_000,
        size,
        WeightPrecision::Compact,
    );
    let (pe, ce, we) = exact.to_csr();
    let (pc, cc, wc) = compact.to_csr();
    assert_eq!((pe, ce), (pc, cc));
    for (a, b) in we.iter().zip(&wc) {
        assert!(((b - a) / a).abs() <= 2f32.powi(-12), "{a} vs {b}");
    }
}
