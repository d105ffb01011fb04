use std::path::Path;

use lsplat_core::Rng;

use crate::layers::BatchNorm;
use crate::train::{Work, batch_loss};
use crate::*;

fn random(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.normal()).collect()
}

fn loss_of(m: &mut Autoencoder, x: &[f32], batch: usize, w: f32) -> (f64, Work) {
    let mut work = Work::default();
    work.x = x.to_vec();
    m.forward_train(&mut work, batch);
    let dim = m.input_dim();
    let out = work.dec.last().cloned().unwrap();
    let l = batch_loss(&out, x, dim, w, &mut work.d);
    (l, work)
}

/// Every trainable tensor's gradient (through the L2 normalisations, ReLUs, training
/// batch norm and both loss terms) against central differences.
#[test]
fn gradients_match_finite_differences() {
    let mut rng = Rng::new(3);
    let (dim, batch) = (6, 7);
    let mut m = Autoencoder::new(dim, &[8, 5, 3], &[5, 7, dim], 11).unwrap();
    // Non-trivial batch-norm parameters.
    for (bn, _) in &mut m.enc {
        bn.weight = (0..bn.dim).map(|_| rng.range(0.5, 1.5)).collect();
        bn.bias = (0..bn.dim).map(|_| rng.range(-0.3, 0.3)).collect();
    }
    let x = random(batch * dim, &mut rng);
    let w = 0.7; // a large cosine weight, so that term is checked too
    let (_, mut work) = loss_of(&mut m.clone(), &x, batch, w);
    let mut grad = m.zeros_like();
    m.backward(&mut work, batch, &mut grad);
    let analytic: Vec<Vec<f32>> = grad.params_mut().into_iter().map(|t| t.clone()).collect();
    let n_tensors = analytic.len();
    let mut checked = 0;
    for (t, an) in analytic.iter().enumerate() {
        let len = an.len();
        for _ in 0..4 {
            let i = rng.below(len as u64) as usize;
            let h = 1e-3f32;
            let mut plus = m.clone();
            plus.params_mut()[t][i] += h;
            let mut minus = m.clone();
            minus.params_mut()[t][i] -= h;
            let fd = (loss_of(&mut plus, &x, batch, w).0 - loss_of(&mut minus, &x, batch, w).0)
                / (2.0 * h as f64);
            let a = an[i] as f64;
            assert!(
                (a - fd).abs() <= 2e-3 + 3e-2 * fd.abs(),
                "tensor {t} element {i}: analytic {a:e}, finite difference {fd:e}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 4 * n_tensors);
}

#[test]
fn batch_norm_keeps_pytorch_running_statistics() {
    let mut bn = BatchNorm::new(2);
    let mut x = vec![1.0, 10.0, 2.0, 20.0, 6.0, 30.0];
    let mut cache = Default::default();
    bn.forward_train(&mut x, 3, &mut cache);
    // Column 0: mean 3, biased var 14/3, unbiased 7.
    assert!((bn.running_mean[0] - 0.3).abs() < 1e-6);
    assert!((bn.running_var[0] - (0.9 + 0.1 * 7.0)).abs() < 1e-5);
    assert!((bn.running_mean[1] - 2.0).abs() < 1e-5);
    assert!((bn.running_var[1] - (0.9 + 0.1 * 100.0)).abs() < 1e-4);
    let inv = 1.0 / (14.0f64 / 3.0 + 1e-5).sqrt();
    assert!((x[0] as f64 - (1.0 - 3.0) * inv).abs() < 1e-5);
    assert_eq!(bn.batches_tracked, 1);
    // Evaluation mode uses the running statistics.
    let mut y = vec![0.3, 2.0];
    bn.forward_eval(&mut y);
    assert!(y[0].abs() < 1e-6 && y[1].abs() < 1e-6);
}

/// Unit features clustered like CLIP features of a scene's masks: a shared direction,
/// objects, and parts that stay close to their object.
pub(crate) fn clustered(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let unit = |v: Vec<f32>| {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect::<Vec<f32>>()
    };
    let common = unit(random(dim, &mut rng));
    let objects: Vec<Vec<f32>> = (0..6)
        .map(|_| {
            let r = unit(random(dim, &mut rng));
            unit(common.iter().zip(&r).map(|(c, x)| c + 0.8 * x).collect())
        })
        .collect();
    let mut out = Vec::with_capacity(rows * dim);
    for i in 0..rows {
        let o = &objects[i % objects.len()];
        let part = (i / objects.len()) % 4;
        let mut prng = Rng::new(seed ^ (((i % 24) as u64 + 1) * 7919) ^ part as u64);
        let p = unit(random(dim, &mut prng));
        let noise = random(dim, &mut rng);
        out.extend(unit(
            o.iter()
                .zip(&p)
                .zip(&noise)
                .map(|((a, b), n)| a + 0.35 * b + 0.004 * n)
                .collect(),
        ));
    }
    out
}

/// A reduced-epoch run on clustered 512-D features reconstructs them (the 100-epoch
/// figure is in docs/PERFORMANCE.md), and the same seed gives the same model bit for bit.
#[test]
fn training_reconstructs_clustered_features_reproducibly() {
    let dim = 512;
    let data = clustered(480, dim, 5);
    let opts = TrainOptions {
        epochs: 60,
        ..Default::default()
    };
    let mut batches = 0;
    let a = train(&data, dim, &opts, |p| {
        if let Progress::Batch { loss, .. } = p {
            assert!(loss.is_finite());
            batches += 1;
        }
    })
    .unwrap();
    assert_eq!(batches, 60 * 8);
    eprintln!("kept epoch {}: {:?}", a.epoch, a.eval);
    assert!(
        a.epoch >= 56,
        "kept epoch {} is one of the last four",
        a.epoch
    );
    assert!(
        a.eval.row_cosine >= 0.95,
        "mean reconstruction cosine {}",
        a.eval.row_cosine
    );
    assert!(a.epoch_losses.last() < a.epoch_losses.first());
    let b = train(&data, dim, &opts, |_| {}).unwrap();
    for bad in [
        TrainOptions {
            batch_size: 1,
            ..opts.clone()
        },
        TrainOptions {
            select_last: 0,
            ..opts.clone()
        },
        TrainOptions {
            lr: f32::NAN,
            ..opts.clone()
        },
    ] {
        assert!(matches!(
            train(&data, dim, &bad, |_| {}),
            Err(AeError::Config(_))
        ));
    }
    assert_eq!(
        model_bytes(&a.model, &Default::default()),
        model_bytes(&b.model, &Default::default())
    );
    let codes = a.model.encode(&data).unwrap();
    assert_eq!(codes.len(), 480 * 3);
    for c in codes.chunks_exact(3) {
        let n = c.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((n - 1.0).abs() < 1e-5);
    }
    // Decoding split over threads gives the same bits as one thread.
    assert_eq!(
        a.model.decode(&codes, 1).unwrap(),
        a.model.decode(&codes, 3).unwrap()
    );
}

#[test]
fn model_files_round_trip_and_bad_files_name_the_problem() {
    let m = Autoencoder::new(512, &ENCODER_DIMS, &DECODER_DIMS, 1).unwrap();
    let mut meta = std::collections::BTreeMap::new();
    meta.insert("epoch".to_string(), "99".to_string());
    let bytes = model_bytes(&m, &meta);
    let p = Path::new("ae.safetensors");
    let back = parse_model(&bytes, p).unwrap();
    assert_eq!(back.model, m);
    assert_eq!(back.metadata["epoch"], "99");
    assert_eq!(back.metadata["input_dim"], "512");
    assert_eq!(back.model.encoder_dims(), ENCODER_DIMS.to_vec());
    assert_eq!(back.model.decoder_dims(), DECODER_DIMS.to_vec());
    // The header names LangSplat's PyTorch tensors.
    let hlen = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + hlen]).unwrap();
    for name in [
        "encoder.0.weight",
        "encoder.1.running_var",
        "encoder.12.bias",
        "decoder.12.weight",
    ] {
        assert!(header.contains(&format!("\"{name}\"")), "{name}");
    }
    // Truncated data.
    let e = parse_model(&bytes[..bytes.len() - 4], p)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("ae.safetensors: tensor"), "{e}");
    // Not a model at all.
    let e = parse_model(b"hello world", p).unwrap_err().to_string();
    assert!(
        e.contains("ae.safetensors") && e.contains("safetensors"),
        "{e}"
    );
    // A model of another dimension.
    let small = Autoencoder::new(64, &[16, 3], &[16, 64], 1).unwrap();
    let e = file::check_input_dim(p, &small, 512, "the dataset's features")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "ae.safetensors: the model is for 64-D features, but the dataset's features are 512-D"
    );
}
