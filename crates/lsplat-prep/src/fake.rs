//! Deterministic stand-ins for the networks, for tests and benchmarks: a SAM whose
//! decoder returns three elliptic blobs around each prompt (sizes, slopes and scores
//! from a hash of the point, so every filter acts) and a CLIP that describes a crop
//! by its colour statistics.

use crate::PrepError;
use crate::model::{ClipEncoder, Decoded, Embedding, ImageEncoder, MaskDecoder};
use crate::resize::Image8;

/// A fake SAM (encoder and decoder).
#[derive(Clone, Debug)]
pub struct FakeSam {
    /// Encoder input side.
    pub side: usize,
    /// Low-resolution mask side.
    pub low: usize,
    /// Calls so far (encoder, decoder).
    pub calls: (usize, usize),
    /// Fail the decoder call with this index (for tests of failures).
    pub fail_at: Option<usize>,
    /// Claim to run on an accelerator (the generator then overlaps batches).
    pub accelerated: bool,
}

impl Default for FakeSam {
    fn default() -> Self {
        FakeSam {
            side: 1024,
            low: 256,
            calls: (0, 0),
            fail_at: None,
            accelerated: false,
        }
    }
}

fn hash(x: f32, y: f32, k: u32) -> f32 {
    let mut h = x.to_bits().wrapping_mul(0x9E37_79B1)
        ^ y.to_bits().rotate_left(13)
        ^ k.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 15;
    h = h.wrapping_mul(0x2C1B_3C6D);
    h ^= h >> 12;
    (h >> 8) as f32 / (1u32 << 24) as f32
}

impl ImageEncoder for FakeSam {
    fn input_size(&self) -> usize {
        self.side
    }
    fn encode(&mut self, image: &[f32]) -> Result<Embedding, PrepError> {
        self.calls.0 += 1;
        let mean = image.iter().map(|&v| v as f64).sum::<f64>() / image.len().max(1) as f64;
        Ok(Embedding {
            shape: vec![1],
            data: vec![mean as f32],
        })
    }
}

impl MaskDecoder for FakeSam {
    fn decode(&mut self, _: &Embedding, points: &[[f32; 2]]) -> Result<Decoded, PrepError> {
        let c = self.calls.1;
        self.calls.1 += 1;
        if self.fail_at == Some(c) {
            return Err(PrepError::model(
                "fake decoder",
                format!("asked to fail at call {c}"),
            ));
        }
        let m = self.low;
        let s = m as f32 / self.side as f32;
        let mut masks = vec![0f32; points.len() * 3 * m * m];
        let mut iou = vec![0f32; points.len() * 3];
        for (i, p) in points.iter().enumerate() {
            let (cx, cy) = ((p[0] + 0.5) * s - 0.5, (p[1] + 0.5) * s - 0.5);
            for k in 0..3 {
                let u = |j: u32| hash(p[0], p[1], k as u32 * 8 + j);
                let r = [2.0 + 3.0 * u(0), 6.0 + 8.0 * u(0), 14.0 + 20.0 * u(0)][k];
                let a = 0.6 + 0.8 * u(1);
                let (rx, ry) = (r * a, r / a);
                let slope = 6.0 + 20.0 * u(2);
                let out = &mut masks[(i * 3 + k) * m * m..(i * 3 + k + 1) * m * m];
                for (q, v) in out.iter_mut().enumerate() {
                    let (x, y) = ((q % m) as f32, (q / m) as f32);
                    let d = ((x - cx) / rx).powi(2) + ((y - cy) / ry).powi(2);
                    *v = (slope * (1.0 - d)).clamp(-20.0, 20.0);
                }
                iou[i * 3 + k] = 0.55 + 0.45 * u(3);
            }
        }
        Ok(Decoded {
            masks,
            side: m,
            iou,
        })
    }

    fn on_accelerator(&self) -> bool {
        self.accelerated
    }
}

/// A fake CLIP: per crop, the mean and mean square of each channel (and ones).
#[derive(Clone, Debug)]
pub struct FakeClip {
    /// Feature dimension (≥ 6).
    pub dim: usize,
}

impl ClipEncoder for FakeClip {
    fn dim(&self) -> usize {
        self.dim
    }
    fn encode(&mut self, crops: &[Image8]) -> Result<Vec<f32>, PrepError> {
        let mut out = vec![1f32; crops.len() * self.dim];
        for (c, f) in crops.iter().zip(out.chunks_exact_mut(self.dim)) {
            let n = (c.data.len() / 3).max(1) as f32;
            for (i, &v) in c.data.iter().enumerate() {
                let v = v as f32 / 255.0;
                f[i % 3] += v / n;
                f[3 + i % 3] += v * v / n;
            }
        }
        Ok(out)
    }
}
