//! Data-parallel gradient averaging over host buffers: dense, or over the rows some
//! rank touched.
//!
//! A batch's cameras see a fraction of the Gaussians; every other row of a rank's
//! gradient is exactly zero. The sparse path first ORs a bitmask of each rank's
//! non-zero rows (one bit per row), then sums only the rows of the union, packed in
//! ascending order. Rows no rank touched are +0.0 on every rank, which is what the
//! dense sum gives, so both paths produce the same numbers. All buffers are sized
//! once: a reduction allocates nothing.

use crate::{Comm, Result};

/// Which reduction [`GradientReducer::mean`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceMode {
    /// Sparse when the union of touched rows plus the mask is smaller than the whole
    /// buffer (decided per step, identically on every rank).
    Auto,
    /// Always the whole buffer.
    Dense,
    /// Always the mask and the touched rows.
    Sparse,
}

/// What one reduction moved (per rank, payload bytes handed to the collective).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceStats {
    /// Bytes of the whole gradient buffer.
    pub dense_bytes: u64,
    /// Bytes this reduction sent: the mask plus the touched rows, or the whole buffer.
    pub sent_bytes: u64,
    /// Rows some rank touched (all rows when the dense path ran without a mask).
    pub touched_rows: u64,
    /// Whether the sparse path ran.
    pub sparse: bool,
}

/// Averages a `[rows, channels]` gradient over the ranks.
#[derive(Debug)]
pub struct GradientReducer {
    rows: usize,
    channels: usize,
    mode: ReduceMode,
    mask: Vec<u64>,
    packed: Vec<f32>,
}

impl GradientReducer {
    /// A reducer for `[rows, channels]` gradients (allocates its buffers now).
    pub fn new(rows: usize, channels: usize, mode: ReduceMode) -> Self {
        let sparse = mode != ReduceMode::Dense;
        GradientReducer {
            rows,
            channels,
            mode,
            mask: if sparse {
                vec![0; rows.div_ceil(64)]
            } else {
                Vec::new()
            },
            packed: if sparse {
                Vec::with_capacity(rows * channels)
            } else {
                Vec::new()
            },
        }
    }

    /// Replaces `grad` (this rank's gradient) by the mean over the ranks.
    pub fn mean(&mut self, comm: &dyn Comm, grad: &mut [f32]) -> Result<ReduceStats> {
        let (rows, c) = (self.rows, self.channels);
        if grad.len() != rows * c {
            return Err(crate::DistError::Mismatch {
                what: "gradient all-reduce".into(),
                problem: format!("{} values for {rows} rows × {c} channels", grad.len()),
            });
        }
        let dense_bytes = (rows * c * 4) as u64;
        let scale = 1.0 / comm.world() as f32;
        if self.mode == ReduceMode::Dense {
            comm.sum_f32("gradient all-reduce", grad)?;
            grad.iter_mut().for_each(|g| *g *= scale);
            return Ok(ReduceStats {
                dense_bytes,
                sent_bytes: dense_bytes,
                touched_rows: rows as u64,
                sparse: false,
            });
        }
        // Bit r: row r holds a non-zero bit pattern (so -0.0 travels too).
        self.mask.iter_mut().for_each(|w| *w = 0);
        for (r, row) in grad.chunks_exact(c).enumerate() {
            if row.iter().any(|v| v.to_bits() != 0) {
                self.mask[r / 64] |= 1 << (r % 64);
            }
        }
        comm.or_u64("touched-row mask all-reduce", &mut self.mask)?;
        let touched: u64 = self.mask.iter().map(|w| w.count_ones() as u64).sum();
        let mask_bytes = (self.mask.len() * 8) as u64;
        let sparse_bytes = mask_bytes + touched * c as u64 * 4;
        if self.mode == ReduceMode::Auto && sparse_bytes >= dense_bytes {
            comm.sum_f32("gradient all-reduce", grad)?;
            grad.iter_mut().for_each(|g| *g *= scale);
            return Ok(ReduceStats {
                dense_bytes,
                sent_bytes: mask_bytes + dense_bytes,
                touched_rows: touched,
                sparse: false,
            });
        }
        self.packed.clear();
        for r in set_bits(&self.mask) {
            self.packed.extend_from_slice(&grad[r * c..r * c + c]);
        }
        comm.sum_f32("gradient all-reduce (touched rows)", &mut self.packed)?;
        for (r, src) in set_bits(&self.mask).zip(self.packed.chunks_exact(c)) {
            for (g, s) in grad[r * c..r * c + c].iter_mut().zip(src) {
                *g = s * scale;
            }
        }
        Ok(ReduceStats {
            dense_bytes,
            sent_bytes: sparse_bytes,
            touched_rows: touched,
            sparse: true,
        })
    }
}

/// Indices of the set bits, ascending.
fn set_bits(mask: &[u64]) -> impl Iterator<Item = usize> + '_ {
    mask.iter().enumerate().flat_map(|(i, &w)| {
        let mut w = w;
        std::iter::from_fn(move || {
            (w != 0).then(|| {
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                i * 64 + b
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_ranks;

    /// Rank r's gradient: rows touched by that rank only, some shared, one -0.0 row.
    fn grad(rank: usize, rows: usize, c: usize) -> Vec<f32> {
        let mut g = vec![0.0f32; rows * c];
        for r in 0..rows {
            if r % 7 == rank || r % 11 == 0 {
                for k in 0..c {
                    g[r * c + k] = (r * 31 + k * 7 + rank * 3) as f32 * 0.013 - 1.0;
                }
            }
        }
        g[(rows - 1) * c] = -0.0;
        g
    }

    #[test]
    fn every_mode_gives_the_float64_mean() {
        let (rows, c, world) = (200, 3, 3);
        let want: Vec<f64> = (0..rows * c)
            .map(|i| (0..world).map(|r| grad(r, rows, c)[i] as f64).sum::<f64>() / world as f64)
            .collect();
        let mut results = Vec::new();
        for mode in [ReduceMode::Dense, ReduceMode::Sparse, ReduceMode::Auto] {
            let out = run_ranks(world, |comm| {
                let mut g = grad(comm.rank(), rows, c);
                let mut red = GradientReducer::new(rows, c, mode);
                let stats = red.mean(comm, &mut g).unwrap();
                (g, stats)
            });
            for (g, stats) in &out {
                assert_eq!(g, &out[0].0, "ranks agree");
                for (a, b) in g.iter().zip(&want) {
                    assert!(
                        (*a as f64 - b).abs() <= 1e-6 * b.abs().max(1.0),
                        "{a} vs {b}"
                    );
                }
                assert_eq!(stats.dense_bytes, (rows * c * 4) as u64);
                if mode == ReduceMode::Sparse {
                    assert!(stats.sparse);
                    // Rows 0..200 with r % 7 < 3 or r % 11 == 0, plus the -0.0 row.
                    let touched = (0..rows).filter(|r| r % 7 < 3 || r % 11 == 0 || *r == rows - 1);
                    assert_eq!(stats.touched_rows, touched.count() as u64);
                    assert!(stats.sent_bytes < stats.dense_bytes);
                }
            }
            results.push(out[0].0.clone());
        }
        // The paths agree bit for bit (untouched rows are +0.0 everywhere).
        assert_eq!(
            results[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            results[1].iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn auto_falls_back_to_dense_when_most_rows_are_touched() {
        let out = run_ranks(2, |comm| {
            let mut g = vec![1.0f32; 64 * 3];
            GradientReducer::new(64, 3, ReduceMode::Auto)
                .mean(comm, &mut g)
                .unwrap()
        });
        assert!(!out[0].sparse);
        assert_eq!(out[0].sent_bytes, 8 + 64 * 3 * 4);
    }

    #[test]
    fn a_wrong_length_is_an_error() {
        let e = GradientReducer::new(4, 3, ReduceMode::Dense)
            .mean(&crate::Local, &mut [0.0; 5])
            .unwrap_err();
        assert!(
            e.to_string().contains("5 values for 4 rows × 3 channels"),
            "{e}"
        );
    }

    #[test]
    fn set_bits_are_ascending() {
        let m = [0b1010u64, 0, 1 << 63];
        assert_eq!(set_bits(&m).collect::<Vec<_>>(), vec![1, 3, 191]);
    }
}
