//! `lsplat-engine autoencoder train|encode`: LangSplat's 512 → 3 autoencoder.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use lsplat_ae::{Progress, TrainOptions};
use lsplat_data::io::write_bytes_atomic;

use crate::progress::Progress as Bar;

/// `autoencoder` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum AeCommand {
    /// Train on every feature row of a dataset (all images, all levels).
    Train(TrainArgs),
    /// Encode a dataset's features into a dataset of codes, ready for training.
    Encode(EncodeArgs),
}

/// Options of `autoencoder train` (defaults: LangSplat's).
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// Dataset folder (features.parquet + masks.parquet), e.g. 512-D CLIP features.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Model file to write (safetensors).
    #[arg(long)]
    pub out: PathBuf,
    /// Passes over the data.
    #[arg(long, default_value_t = 100)]
    pub epochs: usize,
    /// Rows per batch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Adam learning rate.
    #[arg(long, default_value_t = 7e-4)]
    pub lr: f32,
    /// Keep the best of this many last epochs (by the full-set loss).
    #[arg(long, default_value_t = 4)]
    pub select_last: usize,
    /// Encoder widths (comma-separated; the last is the code dimension).
    #[arg(long, value_delimiter = ',', default_value = "256,128,64,32,3")]
    pub encoder: Vec<usize>,
    /// Decoder widths (comma-separated; the last must be the feature dimension).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16,32,64,128,256,256,512"
    )]
    pub decoder: Vec<usize>,
    /// Seed of the initial weights and the shuffles.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Options of `autoencoder encode`.
#[derive(clap::Args, Debug)]
pub struct EncodeArgs {
    /// Model file.
    #[arg(long)]
    pub model: PathBuf,
    /// Dataset to encode.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Dataset folder to write (same masks, encoded features).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs an `autoencoder` subcommand.
pub fn run(cmd: AeCommand) -> Result<()> {
    match cmd {
        AeCommand::Train(a) => train(a),
        AeCommand::Encode(a) => encode(a),
    }
}

fn train(a: TrainArgs) -> Result<()> {
    let rows = lsplat_data::dataset::read_feature_rows(&a.dataset)?;
    let opts = TrainOptions {
        encoder_dims: a.encoder.clone(),
        decoder_dims: a.decoder.clone(),
        lr: a.lr,
        batch_size: a.batch_size,
        epochs: a.epochs,
        select_last: a.select_last,
        seed: a.seed,
        ..Default::default()
    };
    if opts.decoder_dims.last() != Some(&rows.dim) {
        anyhow::bail!(
            "{}: the features are {}-D but the decoder ends at {} (--decoder …,{})",
            a.dataset.display(),
            rows.dim,
            opts.decoder_dims.last().copied().unwrap_or(0),
            rows.dim
        );
    }
    let n = rows.rows();
    let per_epoch = n.div_ceil(a.batch_size.max(1)) as u64;
    let mut bar = Bar::new(
        "autoencoder",
        per_epoch * a.epochs as u64,
        "batches",
        !a.quiet,
        Default::default(),
    );
    let mut batches = 0u64;
    let t0 = Instant::now();
    let trained = lsplat_ae::train(&rows.values, rows.dim, &opts, |p| match p {
        Progress::Batch { epoch, loss } => {
            batches += 1;
            if batches.is_multiple_of(16) {
                bar.set_message(format!("epoch {} loss {loss:.6}", epoch + 1));
            }
            bar.inc(1);
        }
        Progress::Epoch { .. } => {}
    })?;
    let secs = t0.elapsed().as_secs_f64();
    bar.finish();
    let mut meta = BTreeMap::new();
    let e = trained.eval;
    for (k, v) in [
        ("dataset", a.dataset.display().to_string()),
        ("rows", n.to_string()),
        ("epochs", a.epochs.to_string()),
        ("kept_epoch", trained.epoch.to_string()),
        ("batch_size", a.batch_size.to_string()),
        ("lr", a.lr.to_string()),
        ("seed", a.seed.to_string()),
        ("eval_mse", e.mse.to_string()),
        ("eval_cos_loss", e.cos.to_string()),
        ("mean_cosine", e.row_cosine.to_string()),
    ] {
        meta.insert(k.to_string(), v);
    }
    if let Some(parent) = a.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    write_bytes_atomic(&a.out, &lsplat_ae::model_bytes(&trained.model, &meta))?;
    println!(
        "trained on {n} rows of {} images ({}-D) for {} epochs in {secs:.2} s ({:.0} rows/s)",
        rows.images,
        rows.dim,
        a.epochs,
        (n * a.epochs) as f64 / secs.max(1e-9)
    );
    println!(
        "kept epoch {} of the last {}: MSE {:.3e}, 1 − cos(batch axis) {:.4}, mean reconstruction cosine {:.4}",
        trained.epoch + 1,
        a.select_last.min(a.epochs),
        e.mse,
        e.cos,
        e.row_cosine
    );
    println!("wrote {}", a.out.display());
    Ok(())
}

fn encode(a: EncodeArgs) -> Result<()> {
    let file = lsplat_ae::load_model(&a.model)?;
    let m = file.model;
    let t0 = Instant::now();
    let rows =
        lsplat_data::dataset::map_dataset_features(&a.dataset, &a.out, m.code_dim(), |x, d| {
            if d != m.input_dim() {
                return Err(lsplat_data::DataError::format(
                    &a.model,
                    format!(
                        "the model is for {}-D features, but {} has {d}-D features",
                        m.input_dim(),
                        a.dataset.display()
                    ),
                ));
            }
            m.encode(x)
                .map_err(|e| lsplat_data::DataError::format(&a.model, e.to_string()))
        })?;
    println!(
        "encoded {rows} rows ({}-D → {}-D) in {:.2} s",
        m.input_dim(),
        m.code_dim(),
        t0.elapsed().as_secs_f64()
    );
    println!("wrote {}", a.out.display());
    Ok(())
}
