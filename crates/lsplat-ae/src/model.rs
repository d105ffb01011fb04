//! The network: LangSplat's autoencoder (workload.md §1).
//!
//! Encoder: `Linear(D, e₀)`, then for each further width `[BatchNorm1d, ReLU, Linear]`;
//! the code is L2-normalised. Decoder: `Linear(code, d₀)`, then `[ReLU, Linear]` per
//! further width; the output is L2-normalised. LangSplat's widths are the defaults.

use lsplat_core::Rng;

use crate::AeError;
use crate::layers::{BatchNorm, Linear, l2_normalize, relu};

/// LangSplat's encoder widths (the last is the code dimension).
pub const ENCODER_DIMS: [usize; 5] = [256, 128, 64, 32, 3];
/// LangSplat's decoder widths (the last is the feature dimension).
pub const DECODER_DIMS: [usize; 7] = [16, 32, 64, 128, 256, 256, 512];

/// Rows processed at once by [`Autoencoder::encode`] / [`Autoencoder::decode`].
const CHUNK: usize = 2048;

/// The autoencoder's parameters and running statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Autoencoder {
    /// First encoder layer `Linear(D, e₀)`.
    pub enc_first: Linear,
    /// Further encoder stages `[BatchNorm1d, ReLU, Linear]`.
    pub enc: Vec<(BatchNorm, Linear)>,
    /// First decoder layer `Linear(code, d₀)`.
    pub dec_first: Linear,
    /// Further decoder stages `[ReLU, Linear]`.
    pub dec: Vec<Linear>,
}

impl Autoencoder {
    /// A freshly initialised network for `input_dim`-D features (PyTorch's default
    /// initialisation, drawn from `seed`). The decoder must end at `input_dim`.
    pub fn new(
        input_dim: usize,
        encoder_dims: &[usize],
        decoder_dims: &[usize],
        seed: u64,
    ) -> Result<Self, AeError> {
        check_dims(input_dim, encoder_dims, decoder_dims).map_err(AeError::Config)?;
        let mut rng = Rng::new(seed);
        let enc_first = Linear::init(input_dim, encoder_dims[0], &mut rng);
        let enc = encoder_dims
            .windows(2)
            .map(|w| (BatchNorm::new(w[0]), Linear::init(w[0], w[1], &mut rng)))
            .collect();
        let code = *encoder_dims.last().unwrap_or(&0);
        let dec_first = Linear::init(code, decoder_dims[0], &mut rng);
        let dec = decoder_dims
            .windows(2)
            .map(|w| Linear::init(w[0], w[1], &mut rng))
            .collect();
        Ok(Autoencoder {
            enc_first,
            enc,
            dec_first,
            dec,
        })
    }

    /// Feature dimension D (input of the encoder, output of the decoder).
    pub fn input_dim(&self) -> usize {
        self.enc_first.inputs
    }

    /// Code dimension (3 for LangSplat).
    pub fn code_dim(&self) -> usize {
        self.enc
            .last()
            .map_or(self.enc_first.outputs, |s| s.1.outputs)
    }

    /// Encoder widths, first to code.
    pub fn encoder_dims(&self) -> Vec<usize> {
        std::iter::once(self.enc_first.outputs)
            .chain(self.enc.iter().map(|s| s.1.outputs))
            .collect()
    }

    /// Decoder widths, first to output.
    pub fn decoder_dims(&self) -> Vec<usize> {
        std::iter::once(self.dec_first.outputs)
            .chain(self.dec.iter().map(|l| l.outputs))
            .collect()
    }

    /// Trainable parameters: every tensor an optimiser updates, in a fixed order
    /// (weights and biases of the linear layers, γ and β of the batch norms).
    pub fn params_mut(&mut self) -> Vec<&mut Vec<f32>> {
        let mut v: Vec<&mut Vec<f32>> = vec![&mut self.enc_first.weight, &mut self.enc_first.bias];
        for (bn, lin) in &mut self.enc {
            v.extend([&mut bn.weight, &mut bn.bias, &mut lin.weight, &mut lin.bias]);
        }
        v.extend([&mut self.dec_first.weight, &mut self.dec_first.bias]);
        for lin in &mut self.dec {
            v.extend([&mut lin.weight, &mut lin.bias]);
        }
        v
    }

    /// A network of the same shape with every value 0 (gradients, Adam moments).
    pub fn zeros_like(&self) -> Self {
        Autoencoder {
            enc_first: self.enc_first.zeros_like(),
            enc: self
                .enc
                .iter()
                .map(|(b, l)| (b.zeros_like(), l.zeros_like()))
                .collect(),
            dec_first: self.dec_first.zeros_like(),
            dec: self.dec.iter().map(Linear::zeros_like).collect(),
        }
    }

    /// Encodes `[rows, D]` features to unit `[rows, code]` codes (evaluation mode:
    /// batch norms use their running statistics). Rows are independent.
    pub fn encode(&self, features: &[f32]) -> Result<Vec<f32>, AeError> {
        let d = self.input_dim();
        if !features.len().is_multiple_of(d) {
            return Err(AeError::Width {
                what: format!("input of {} values", features.len()),
                got: features.len() % d,
                want: d,
            });
        }
        let code = self.code_dim();
        let mut out = Vec::with_capacity(features.len() / d * code);
        let (mut a, mut b, mut norms) = (Vec::new(), Vec::new(), Vec::new());
        for chunk in features.chunks(CHUNK * d) {
            let n = chunk.len() / d;
            self.enc_first.forward(chunk, n, &mut a);
            for (bn, lin) in &self.enc {
                bn.forward_eval(&mut a);
                relu(&mut a);
                lin.forward(&a, n, &mut b);
                std::mem::swap(&mut a, &mut b);
            }
            l2_normalize(&mut a, code, &mut norms);
            out.extend_from_slice(&a);
        }
        Ok(out)
    }

    /// Decodes `[rows, code]` codes (or rendered code images) to unit `[rows, D]`
    /// features. Rows are independent; `threads > 1` splits them over scoped threads
    /// (the result does not depend on the split).
    pub fn decode(&self, codes: &[f32], threads: usize) -> Result<Vec<f32>, AeError> {
        let c = self.code_dim();
        if !codes.len().is_multiple_of(c) {
            return Err(AeError::Width {
                what: format!("codes of {} values", codes.len()),
                got: codes.len() % c,
                want: c,
            });
        }
        let rows = codes.len() / c;
        let d = self.input_dim();
        let mut out = vec![0f32; rows * d];
        let per = rows.div_ceil(threads.max(1)).max(1);
        std::thread::scope(|s| {
            for (src, dst) in codes.chunks(per * c).zip(out.chunks_mut(per * d)) {
                s.spawn(move || self.decode_into(src, dst));
            }
        });
        Ok(out)
    }

    fn decode_into(&self, codes: &[f32], out: &mut [f32]) {
        let (c, d) = (self.code_dim(), self.input_dim());
        let (mut a, mut b, mut norms) = (Vec::new(), Vec::new(), Vec::new());
        for (src, dst) in codes.chunks(CHUNK * c).zip(out.chunks_mut(CHUNK * d)) {
            let n = src.len() / c;
            self.dec_first.forward(src, n, &mut a);
            for lin in &self.dec {
                relu(&mut a);
                lin.forward(&a, n, &mut b);
                std::mem::swap(&mut a, &mut b);
            }
            l2_normalize(&mut a, d, &mut norms);
            dst.copy_from_slice(&a);
        }
    }
}

/// Checks a network description: every width ≥ 1, the decoder ends at `input_dim`.
pub fn check_dims(input_dim: usize, enc: &[usize], dec: &[usize]) -> Result<(), String> {
    if input_dim == 0 || enc.is_empty() || dec.is_empty() {
        return Err("the feature dimension and both width lists must be non-empty".into());
    }
    if enc.iter().chain(dec).any(|&w| w == 0) {
        return Err(format!(
            "a layer width is 0 (encoder {enc:?}, decoder {dec:?})"
        ));
    }
    if dec.last() != Some(&input_dim) {
        return Err(format!(
            "the decoder ends at {} but the features are {input_dim}-D",
            dec.last().copied().unwrap_or(0)
        ));
    }
    Ok(())
}
